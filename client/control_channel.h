// How the chief's control calls reach each PS of a job: one call to one PS
// at a time, by gRPC (client/grpc_control_channel.h) or, in a test's
// in-process cluster, by function call (client/in_process_cluster.h). The
// fan-out over every PS, retries and the job-level meaning of the answers
// are PsAdmin's (client/ps_admin.h).
//
// Every call fails by its deadline; errors name the PS and the call ("ps:1
// (127.0.0.1:4001): SaveCheckpoint: ..."); Unavailable means the PS was not
// reached (worth trying again). Thread-safe: calls to different PS (and to
// one) may run at once.
#ifndef PSTRAIN_CLIENT_CONTROL_CHANNEL_H_
#define PSTRAIN_CLIENT_CONTROL_CHANNEL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "proto/ps_service.pb.h"

namespace pstrain::client {

class PsControlChannel {
 public:
  virtual ~PsControlChannel() = default;

  virtual int num_ps() const = 0;
  // "ps:1 (127.0.0.1:4001)".
  virtual std::string PsName(int ps) const = 0;

  // With `wait_for_connection`, a PS being connected to (a TLS handshake,
  // say) is waited for until the deadline instead of failing at once.
  // FailedPrecondition when the PS says it is another PS.
  virtual absl::StatusOr<v1::HealthResponse> Health(int ps, absl::Time deadline,
                                                    bool wait_for_connection) = 0;
  virtual absl::StatusOr<v1::CreateVariablesResponse> CreateVariables(
      int ps, const v1::CreateVariablesRequest& req, absl::Time deadline) = 0;
  virtual absl::StatusOr<v1::StatsResponse> Stats(int ps, absl::Time deadline) = 0;
  virtual absl::StatusOr<v1::HoldPushesResponse> HoldPushes(int ps,
                                                            const v1::HoldPushesRequest& req,
                                                            absl::Time deadline) = 0;
  virtual absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(
      int ps, const v1::SaveCheckpointRequest& req, absl::Time deadline) = 0;
  virtual absl::StatusOr<v1::RestoreResponse> Restore(int ps, const v1::RestoreRequest& req,
                                                      absl::Time deadline) = 0;
  virtual absl::Status Shutdown(int ps, const v1::ShutdownRequest& req, absl::Time deadline) = 0;

  // For an error of a call to `ps`: a hint at a cause the error cannot
  // show (a TLS handshake the PS refused), or empty.
  virtual std::string Hint(const absl::Status& s) const { return ""; }

  // Ends every call in flight (Cancelled) and refuses later ones: for a
  // job that failed for good, whose chief has nothing more to ask its PS
  // and must not wait out a deadline on one that has gone.
  virtual void CancelCalls() {}
};

// What every PS said when they were all ready (WaitForPs).
struct PsReady {
  int64_t generation = 0;     // the generation they serve
  int64_t restored_step = 0;  // the largest step any restored from
};

// Polls every PS's Health until all answer (and, with
// `require_initialized`, serve initialised variables of one generation) or
// `timeout` passes; logs, every 5 s, whom it still waits for and since
// when. DeadlineExceeded naming every PS still missing and why;
// FailedPrecondition at once from a PS that says it is another; the abort
// check's error (when set, asked every round) ends the wait.
absl::StatusOr<PsReady> WaitForPs(PsControlChannel& channel, absl::Duration timeout,
                                  bool require_initialized,
                                  const std::function<absl::Status()>& abort_check = nullptr);

// The pushes the PS applied from training replica `replica`, from their
// Stats: the fewest over every dense slice of `placement` (each step pushes
// each slice once). NotFound when a PS keeps no count of it (a checkpoint
// written before the counts) or the model has no dense variable.
absl::StatusOr<int64_t> ReplicaPushesIn(const std::vector<v1::StatsResponse>& stats,
                                        const Placement& placement, int replica,
                                        const PsControlChannel& channel);

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_CONTROL_CHANNEL_H_
