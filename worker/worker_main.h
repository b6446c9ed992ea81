// The worker role's main: trains this replica's shard against the PS and
// reports to the chief; worker 0 of a cluster without a chief also takes the
// chief's duties (TensorFlow's rule).
#ifndef PSTRAIN_WORKER_WORKER_MAIN_H_
#define PSTRAIN_WORKER_WORKER_MAIN_H_

#include <memory>

#include "base/cli_args.h"
#include "transport/security.h"
#include "cluster/tf_config.h"

namespace pstrain::worker {

// Flags: the job flags (job/job_flags.h), --ps_wait_s, --blas_threads,
// --bind and --job_timeout_s (used with chief duties, accepted without).
// Returns the process exit code. REQUIRES: cfg.task.role == Role::kWorker.
int WorkerMain(const TfConfig& cfg, CliArgs& args,
               std::shared_ptr<const Security> security);

}  // namespace pstrain::worker

#endif  // PSTRAIN_WORKER_WORKER_MAIN_H_
