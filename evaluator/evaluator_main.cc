#include "evaluator/evaluator_main.h"

#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "evaluator/evaluator.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/task_flags.h"

namespace pstrain::evaluator {
namespace {

absl::Status Run(const TfConfig& cfg, CliArgs& args) {
  EvaluatorOptions options;
  PSTRAIN_ASSIGN_OR_RETURN(options.job, JobSpecFromFlags(args));
  PSTRAIN_ASSIGN_OR_RETURN(options.output_dir, OutputDirFromFlags(args, cfg.environment));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t poll_s, IntFlag(args, "eval_poll_secs"));
  PSTRAIN_ASSIGN_OR_RETURN(options.once, BoolFlag(args, "once"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t idle_s, IntFlag(args, "idle_timeout_s"));
  PSTRAIN_RETURN_IF_ERROR(CheckTaskFlags(args, Role::kEvaluator));
  if (poll_s < 1 || idle_s < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval_poll_secs=", poll_s, " --idle_timeout_s=", idle_s, ": each must be >= 1"));
  }
  if (cfg.cluster.ps.empty()) {
    return absl::InvalidArgumentError("TF_CONFIG cluster has no ps: nothing to evaluate");
  }
  options.poll = absl::Seconds(poll_s);
  options.idle_timeout = absl::Seconds(idle_s);
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<Score> scores, RunEvaluator(options));
  Log("evaluator: done, ", scores.size(), " checkpoint(s) scored");
  return absl::OkStatus();
}

}  // namespace

int EvaluatorMain(const TfConfig& cfg, CliArgs& args) {
  absl::Status s = Run(cfg, args);
  if (!s.ok()) Log("failed: ", s.message());
  return ExitCodeFor(s);
}

}  // namespace pstrain::evaluator
