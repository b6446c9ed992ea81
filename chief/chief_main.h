// The chief role's main (also "master"): coordinates the job, trains as
// replica 0 unless --chief_trains=false, and scores the final values.
#ifndef PSTRAIN_CHIEF_CHIEF_MAIN_H_
#define PSTRAIN_CHIEF_CHIEF_MAIN_H_

#include <memory>

#include "base/cli_args.h"
#include "transport/security.h"
#include "cluster/tf_config.h"

namespace pstrain::chief {

// Flags: the job flags (job/job_flags.h), --output_dir, --bind,
// --ps_wait_s, --job_timeout_s, --blas_threads. Prints "test accuracy: X" at the end.
// Returns the process exit code. REQUIRES: cfg.task.role == Role::kChief.
int ChiefMain(const TfConfig& cfg, CliArgs& args,
              std::shared_ptr<const Security> security);

}  // namespace pstrain::chief

#endif  // PSTRAIN_CHIEF_CHIEF_MAIN_H_
