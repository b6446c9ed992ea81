// The CreateVariables request the chief sends each PS (proto/
// ps_service.proto): the PS's slices of the model, with their values or
// initializers, every embedding table, and the job's settings. One
// builder for every way a PS is reached (client/ps_client.h over gRPC, an
// in-process PS through store/ps_control.h). Stateless.
#ifndef PSTRAIN_CLIENT_CREATE_REQUEST_H_
#define PSTRAIN_CLIENT_CREATE_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cluster/consistency.h"
#include "cluster/optimizer_spec.h"
#include "cluster/placement.h"
#include "proto/ps_service.pb.h"

namespace pstrain::client {

// What the chief tells every PS besides the variables.
struct CreateOptions {
  OptimizerSpec optimizer;
  Consistency consistency;
  int num_replicas = 1;
  int replicas_to_aggregate = 0;  // sync: 0 means all
  uint64_t seed = 1;
  // When restore_step >= 0: each PS loads checkpoint restore_step under
  // restore_dir, written by restore_num_ps PS (0: as many as now), after
  // creating the variables, and reports itself initialised only then.
  std::string restore_dir;
  int64_t restore_step = -1;
  int restore_num_ps = 0;
  // The recovery generation the PS serve (proto/ps_service.proto, Frame).
  int64_t generation = 1;
  // A pull's bound on waiting for other replicas (0: the PS's default).
  absl::Duration sync_wait = absl::ZeroDuration();
};

// The request for PS `ps` of `placement`: its slices, with values taken
// from `params` (variable v from offsets[v], in placement.variables'
// order) or, when `params` is empty, their initializers; every embedding
// table; and `create`'s settings. REQUIRES: 0 <= ps < placement.num_ps.
v1::CreateVariablesRequest CreateRequestFor(const Placement& placement, int ps,
                                            const std::vector<float>& params,
                                            const std::vector<int64_t>& offsets,
                                            const CreateOptions& create);

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_CREATE_REQUEST_H_
