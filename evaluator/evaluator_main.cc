#include "evaluator/evaluator_main.h"

#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "evaluator/evaluator.h"
#include "job/chief_client.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/run_record.h"
#include "job/task_flags.h"

namespace pstrain::evaluator {
namespace {

absl::StatusOr<EvaluatorOptions> Configure(const TfConfig& cfg, CliArgs& args,
                                           std::shared_ptr<const Security> security) {
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
  // A job that failed for good (its record on disk, or the chief says so)
  // will write no more checkpoints: the evaluator ends with the job's code.
  options.job_failure =
      JobFailureCheck(options.output_dir, args.raw_flags(), ClusterOf(cfg), absl::Now(),
                      cfg.coordinator_address(), cfg.task.ToString(), std::move(security));
  return options;
}

}  // namespace

int EvaluatorMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
  absl::StatusOr<EvaluatorOptions> options = Configure(cfg, args, security);
  if (!options.ok()) {
    Log("failed: ", options.status().message());
    return RoleExitCode(options.status(), FailureKind::kBadConfig);
  }
  absl::StatusOr<std::vector<Score>> scores = RunEvaluator(*options);
  if (!scores.ok()) {
    Log("failed: ", scores.status().message());
    // Scoring's failures are permanent unless they say otherwise (a run
    // of another model is the configuration's, evaluator/evaluator.cc).
    const int code = RoleExitCode(scores.status(), FailureKind::kPermanent);
    // One of its own (not the job's failure it was told of): the job, whose
    // chief would wait for scores that will not come, fails with it.
    std::optional<HostPort> chief = cfg.coordinator_address();
    if (code < kExitRetryable && chief.has_value() && options->job_failure().ok()) {
      ReportFailureToChief(*chief, cfg.task, scores.status(), code, *security);
    }
    return code;
  }
  Log("evaluator: done, ", scores->size(), " checkpoint(s) scored");
  return kExitOk;
}

}  // namespace pstrain::evaluator
