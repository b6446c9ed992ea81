// `pstrain tfconfig uai`: the TF_CONFIG of every task of a UAI-Train-style
// job, for platforms that start one container per task and hand each its
// TF_CONFIG. Main-layer code.
#ifndef PSTRAIN_CLI_TFCONFIG_H_
#define PSTRAIN_CLI_TFCONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli_args.h"
#include "cluster/tf_config.h"

namespace pstrain {

// The UAI-Train layout on `nodes` (host names or addresses, at least 2):
// the master on node 0 at `worker_port`, a PS on every node at `ps_port`,
// a worker on each other node at `worker_port`; environment "cloud". In
// task order: master:0, ps:0.., worker:0.. InvalidArgument naming the
// problem for fewer than 2 nodes, an empty or repeated host, equal ports or
// a port outside 1..65535.
absl::StatusOr<std::vector<TfConfig>> UaiTfConfigs(const std::vector<std::string>& nodes,
                                                   int ps_port, int worker_port);

// `pstrain tfconfig uai --nodes H0,H1,... --ps-port P --worker-port W
// [--out DIR]`: prints "<task> <TF_CONFIG JSON>" per task, one per line,
// or with --out writes DIR/<type>-<index>.json per task (and lists them).
// Returns the exit code; errors go to stderr, one line, code 2.
int TfConfigMain(CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_TFCONFIG_H_
