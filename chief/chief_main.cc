#include "chief/chief_main.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "allreduce/allreduce_main.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "coordinator/chief_duties.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/task_flags.h"
#include "model/compute_threads.h"
#include "train/replica.h"

namespace pstrain::chief {
namespace {

absl::StatusOr<coordinator::ChiefOptions> Configure(
    const TfConfig& cfg, CliArgs& args, const std::shared_ptr<const Security>& security) {
  PSTRAIN_RETURN_IF_ERROR(ValidateForParameterServerTraining(cfg));
  coordinator::ChiefOptions options;
  PSTRAIN_ASSIGN_OR_RETURN(options.job, JobSpecFromFlags(args));
  PSTRAIN_ASSIGN_OR_RETURN(options.output_dir, OutputDirFromFlags(args, cfg.environment));
  PSTRAIN_ASSIGN_OR_RETURN(options.bind_address,
                           StringFlag(args, "bind", cfg.task_address()->ToString()));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t ps_wait_s, IntFlag(args, "ps_wait_s"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t job_timeout_s, IntFlag(args, "job_timeout_s"));
  // As for workers: one BLAS thread when the chief trains beside its duties.
  PSTRAIN_ASSIGN_OR_RETURN(int64_t blas_threads, IntFlag(args, "blas_threads"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t eval_wait_s, IntFlag(args, "eval_wait_secs"));
  PSTRAIN_RETURN_IF_ERROR(CheckTaskFlags(args, Role::kChief));
  PSTRAIN_RETURN_IF_ERROR(CheckStragglers(options.job, cfg.cluster));
  PSTRAIN_RETURN_IF_ERROR(CheckTableUpdates(options.job, cfg.cluster));
  if (std::string plan = DevicePlan(options.job); !plan.empty()) Log(plan);
  options.eval_wait = absl::Seconds(eval_wait_s);
  options.run = RunInfo(args, cfg);
  options.ps_wait = absl::Seconds(ps_wait_s);
  options.job_timeout = absl::Seconds(job_timeout_s);
  options.security = security;
  model::SetComputeThreads(static_cast<int>(blas_threads));
  return options;
}

// Takes over the PS and the run on disk (setup: the configuration's
// failures), trains as replica 0 when the chief trains, finishes the job
// (ChiefDuties::TrainAndFinish: a failure stops the PS with the job's code).
absl::Status Work(const TfConfig& cfg, const coordinator::ChiefOptions& options) {
  auto started = coordinator::ChiefDuties::Start(cfg, options);
  if (!started.ok()) return AsSetupFailure(started.status());
  std::unique_ptr<coordinator::ChiefDuties> duties = *std::move(started);
  duties->CheckpointOnStopSignals();
  std::optional<train::ReplicaOptions> replica;
  if (options.job.chief_trains) {
    replica.emplace();
    replica->job = options.job;
    replica->output_dir = options.output_dir;
    replica->ps_wait = options.ps_wait;
    replica->security = options.security;
  }
  PSTRAIN_ASSIGN_OR_RETURN(Json metrics,
                           duties->TrainAndFinish(replica.has_value() ? &*replica : nullptr));
  const std::string line =
      absl::StrFormat("test accuracy: %.4f (loss %.4f on %d examples, global step %d)",
                      FindMember(metrics, "test_accuracy")->get<double>(),
                      FindMember(metrics, "test_loss")->get<double>(),
                      FindMember(metrics, "test_examples")->get<int64_t>(),
                      FindMember(metrics, "global_step")->get<int64_t>());
  Log(line);
  Log("metrics written to ", options.output_dir, "/final_metrics.json");
  return absl::OkStatus();
}

}  // namespace

int ChiefMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
  // No ps: the replicas average their gradients among themselves.
  if (cfg.cluster.ps.empty()) return allreduce::AllReduceMain(cfg, args, std::move(security));
  absl::StatusOr<coordinator::ChiefOptions> options = Configure(cfg, args, security);
  if (!options.ok()) {
    Log("job failed: ", options.status().message());
    return RoleExitCode(options.status(), FailureKind::kBadConfig);
  }
  absl::Status s = Work(cfg, *options);
  if (!s.ok()) Log("job failed: ", s.message());
  // Past its flags and its take-over, the job's failure is permanent
  // unless what failed said otherwise (a refused task, a lost PS).
  return RoleExitCode(s, FailureKind::kPermanent);
}

}  // namespace pstrain::chief
