// The evaluator task's main: flags are the job flags (job/job_flags.h),
// --output_dir, --eval_poll_secs=S (2), --once, --idle_timeout_s=S (86400).
#ifndef PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_
#define PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_

#include <memory>

#include "base/cli_args.h"
#include "cluster/tf_config.h"
#include "transport/security.h"

namespace pstrain::evaluator {

// Returns the exit code. `security`: for asking the task with chief duties,
// between polls, whether the job failed for good (job/chief_client.h).
int EvaluatorMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security);

}  // namespace pstrain::evaluator

#endif  // PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_
