#include "evaluator/evaluator_main.h"

#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "evaluator/evaluator.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/run_record.h"
#include "job/task_flags.h"

namespace pstrain::evaluator {
namespace {

absl::StatusOr<EvaluatorOptions> Configure(const TfConfig& cfg, CliArgs& args) {
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
  options.poll = absl::Seconds(poll_s);
  options.idle_timeout = absl::Seconds(idle_s);
  // A job that failed for good (its record on disk) will write no more
  // checkpoints: the evaluator ends with the job's code.
  options.job_failure = [dir = options.output_dir, flags = args.raw_flags(),
                         cluster = ClusterOf(cfg), since = absl::Now()] {
    return EndedBadly(dir, flags, cluster, since).value_or(absl::OkStatus());
  };
  return options;
}

}  // namespace

int EvaluatorMain(const TfConfig& cfg, CliArgs& args) {
  absl::StatusOr<EvaluatorOptions> options = Configure(cfg, args);
  if (!options.ok()) {
    Log("failed: ", options.status().message());
    return RoleExitCode(options.status(), FailureKind::kBadConfig);
  }
  absl::StatusOr<std::vector<Score>> scores = RunEvaluator(*options);
  if (!scores.ok()) {
    Log("failed: ", scores.status().message());
    // Scoring's failures are permanent unless they say otherwise (a run
    // of another model is the configuration's, evaluator/evaluator.cc).
    return RoleExitCode(scores.status(), FailureKind::kPermanent);
  }
  Log("evaluator: done, ", scores->size(), " checkpoint(s) scored");
  return kExitOk;
}

}  // namespace pstrain::evaluator
