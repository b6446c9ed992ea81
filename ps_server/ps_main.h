// The ps role's main: serves this task's shards until the chief says the job
// is over (Shutdown RPC) or SIGINT/SIGTERM arrives.
#ifndef PSTRAIN_PS_SERVER_PS_MAIN_H_
#define PSTRAIN_PS_SERVER_PS_MAIN_H_

#include <memory>

#include "base/cli_args.h"
#include "transport/security.h"
#include "cluster/tf_config.h"

namespace pstrain::ps {

// Flags: --bind=HOST:PORT (default: this task's address in TF_CONFIG);
// --tcp_frames=false keeps Exchange frames in gRPC only (by default a job
// without TLS also takes them over plain TCP: ps_server/frame_server.h).
// Returns the process exit code (base/exit_codes.h).
// REQUIRES: cfg.task.role == Role::kPs.
int PsMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security);

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_PS_MAIN_H_
