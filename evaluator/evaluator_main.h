// The evaluator task's main: flags are the job flags (job/job_flags.h),
// --output_dir, --eval_poll_secs=S (2), --once, --idle_timeout_s=S (86400).
#ifndef PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_
#define PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_

#include "base/cli_args.h"
#include "cluster/tf_config.h"

namespace pstrain::evaluator {

// Returns the exit code.
int EvaluatorMain(const TfConfig& cfg, CliArgs& args);

}  // namespace pstrain::evaluator

#endif  // PSTRAIN_EVALUATOR_EVALUATOR_MAIN_H_
