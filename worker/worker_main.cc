#include "model/compute_threads.h"
#include "worker/worker_main.h"

#include <functional>

#include "absl/strings/str_format.h"
#include "allreduce/allreduce_main.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "coordinator/chief_duties.h"
#include "job/chief_client.h"
#include "job/job_description.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/run_record.h"
#include "job/task_flags.h"
#include "train/replica.h"

namespace pstrain::worker {
namespace {

// What the flags say: this replica's options, and the chief's should this
// worker take the chief's duties.
struct WorkerSetup {
  train::ReplicaOptions replica;
  bool chief_duties = false;
  coordinator::ChiefOptions chief_options;
  Json job;  // what the chief compares with its own job as this task joins
  // Set when run.json says this job ended well before this start (a late
  // or restarted worker): when (job/run_record.h, EndedWell).
  std::optional<std::string> ended;
  // The job's failure for good once run.json records it or the chief says
  // so (job/chief_client.h, JobFailureCheck): asked while this worker waits
  // for the chief or its PS.
  std::function<absl::Status()> recorded_failure;
  // Whether run.json now records that this job ended well: when (asked
  // while this worker waits to join a chief that may have finished the job
  // and gone in the meantime).
  std::function<std::optional<std::string>()> ended_since;
};

absl::StatusOr<WorkerSetup> Configure(const TfConfig& cfg, CliArgs& args,
                                      const std::shared_ptr<const Security>& security) {
  PSTRAIN_RETURN_IF_ERROR(ValidateForParameterServerTraining(cfg));
  WorkerSetup setup;
  train::ReplicaOptions& replica = setup.replica;
  PSTRAIN_ASSIGN_OR_RETURN(replica.job, JobSpecFromFlags(args));
  PSTRAIN_ASSIGN_OR_RETURN(replica.output_dir, OutputDirFromFlags(args, cfg.environment));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t ps_wait_s, IntFlag(args, "ps_wait_s"));
  replica.ps_wait = absl::Seconds(ps_wait_s);
  replica.security = security;
  // One BLAS thread: a worker shares the machine with the PS and other
  // workers, and these matrices are too small to split well.
  PSTRAIN_ASSIGN_OR_RETURN(int64_t blas_threads, IntFlag(args, "blas_threads"));
  setup.chief_duties = cfg.HasChiefDuties();
  coordinator::ChiefOptions& chief_options = setup.chief_options;
  // Only a worker with chief duties serves (the Coordinator) and waits for
  // the evaluator; the others read --bind, --job_timeout_s and
  // --eval_wait_secs too, so that one pod spec fits all.
  PSTRAIN_ASSIGN_OR_RETURN(chief_options.bind_address,
                           StringFlag(args, "bind", cfg.task_address()->ToString()));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t job_timeout_s, IntFlag(args, "job_timeout_s"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t eval_wait_s, IntFlag(args, "eval_wait_secs"));
  if (setup.chief_duties) {
    chief_options.job = replica.job;
    chief_options.output_dir = replica.output_dir;
    chief_options.ps_wait = replica.ps_wait;
    chief_options.job_timeout = absl::Seconds(job_timeout_s);
    chief_options.eval_wait = absl::Seconds(eval_wait_s);
    chief_options.run = RunInfo(args, cfg);
    chief_options.security = security;
  }
  PSTRAIN_RETURN_IF_ERROR(CheckTaskFlags(args, Role::kWorker));
  PSTRAIN_RETURN_IF_ERROR(CheckStragglers(replica.job, cfg.cluster));
  PSTRAIN_RETURN_IF_ERROR(CheckTableUpdates(replica.job, cfg.cluster));
  if (std::string plan = DevicePlan(replica.job); !plan.empty()) Log(plan);
  model::SetComputeThreads(static_cast<int>(blas_threads));
  PSTRAIN_ASSIGN_OR_RETURN(setup.job, DescribeJobAndModel(replica.job));
  setup.ended_since = [dir = replica.output_dir, flags = args.raw_flags(),
                       cluster = ClusterOf(cfg)] { return EndedWell(dir, flags, cluster); };
  setup.ended = setup.ended_since();
  setup.recorded_failure =
      JobFailureCheck(replica.output_dir, args.raw_flags(), ClusterOf(cfg), absl::Now(),
                      setup.chief_duties ? std::nullopt : cfg.chief_duties_address(),
                      cfg.task.ToString(), security);
  return setup;
}

// A worker without the chief's duties: joins, trains, reports to the
// chief. While it waits for the chief or its PS, a failure of the job that
// run.json records ends the wait with the job's code.
absl::Status TrainAndReport(const TfConfig& cfg, WorkerSetup& setup) {
  train::ReplicaOptions& replica = setup.replica;
  const Security& security = *replica.security;
  // A replica asks the chief first: one that finished before (its report
  // kept, not rolled back since), or of a job that finished, exits at once.
  // So does one still waiting when the chief has finished the job and gone
  // (a relaunch of a job that had ended: the chief finds nothing to do).
  std::optional<std::string> ended;
  auto failed_or_ended = [&setup, &ended]() -> absl::Status {
    PSTRAIN_RETURN_IF_ERROR(setup.recorded_failure());
    ended = setup.ended_since();
    return ended.has_value() ? absl::AbortedError("the job ended") : absl::OkStatus();
  };
  absl::StatusOr<bool> joined =
      coordinator::JoinChief(*cfg.chief_duties_address(), cfg.task, replica.ps_wait, security,
                             setup.job, nullptr, failed_or_ended);
  if (!joined.ok() && ended.has_value()) {
    Log("the job finished at ", *ended, " (", RunRecordPath(replica.output_dir),
        ") while this task waited for the chief: nothing to train");
    return absl::OkStatus();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const bool done, std::move(joined));
  if (done) {
    Log(cfg.task.ToString(), " finished training before this start; not training again");
    return absl::OkStatus();
  }
  replica.job_failure = setup.recorded_failure;
  absl::StatusOr<v1::ReportDoneRequest> report = train::TrainAsReplica(cfg, replica);
  if (!report.ok()) {
    // Failed for good (its data, say): the chief ends the job with this
    // code at once instead of waiting for this replica. Not when the job's
    // own failure is what ended it.
    const int code = RoleExitCode(report.status(), FailureKind::kPermanent);
    if (code < kExitRetryable && setup.recorded_failure().ok()) {
      ReportFailureToChief(*cfg.chief_duties_address(), cfg.task, report.status(),
                                        code, security);
    }
    return report.status();
  }
  return coordinator::ReportDoneToChief(*cfg.chief_duties_address(), *report, replica.ps_wait,
                                        security, setup.recorded_failure);
}

// Joins the job (taking the chief's duties first when the cluster has no
// chief), trains, reports. Taking over the PS and the run on disk are
// setup (the configuration's failures); TrainAsReplica marks its own.
absl::Status Work(const TfConfig& cfg, WorkerSetup& setup) {
  if (!setup.chief_duties) {
    if (setup.ended.has_value()) {
      Log("the job finished at ", *setup.ended, " (", RunRecordPath(setup.replica.output_dir),
          "): nothing to train");
      return absl::OkStatus();
    }
    return TrainAndReport(cfg, setup);
  }
  Log("the cluster has no chief: worker:0 takes the chief's duties");
  auto started = coordinator::ChiefDuties::Start(cfg, setup.chief_options);
  if (!started.ok()) return AsSetupFailure(started.status());
  std::unique_ptr<coordinator::ChiefDuties> duties = *std::move(started);
  duties->CheckpointOnStopSignals();
  // A failure stops the PS with the job's code (ChiefDuties::TrainAndFinish).
  PSTRAIN_ASSIGN_OR_RETURN(Json metrics, duties->TrainAndFinish(&setup.replica));
  Log(absl::StrFormat("test accuracy: %.4f (loss %.4f)",
                      FindMember(metrics, "test_accuracy")->get<double>(),
                      FindMember(metrics, "test_loss")->get<double>()));
  return absl::OkStatus();
}

}  // namespace

int WorkerMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
  // No ps: the replicas average their gradients among themselves.
  if (cfg.cluster.ps.empty()) return allreduce::AllReduceMain(cfg, args, std::move(security));
  absl::StatusOr<WorkerSetup> setup = Configure(cfg, args, security);
  if (!setup.ok()) {
    Log("failed: ", setup.status().message());
    return RoleExitCode(setup.status(), FailureKind::kBadConfig);
  }
  absl::Status s = Work(cfg, *setup);
  if (!s.ok()) Log("failed: ", s.message());
  // Past its flags, a worker's failure is permanent unless what failed
  // said otherwise (a refused join, its data, a lost PS).
  return RoleExitCode(s, FailureKind::kPermanent);
}

}  // namespace pstrain::worker
