// What the task with chief duties does for a job (the chief, or worker 0 when
// the cluster has no chief):
//   Start():  lock output_dir for the life of these duties, one job per
//             directory (a second chief there is refused, exit 2, naming
//             the holder: job/run_record.h, LockOutputDir); refuse an
//             output_dir whose run.json is of another model (its
//             variables, shapes or optimizer; job/run_record.h),
//             changing nothing there; read the test split (a data error
//             fails here, before anything is written); record this launch
//             in run.json;
//             read back the done reports of replicas that finished under an
//             earlier run of the chief (output_dir/done, coordinator.h);
//             serve the Coordinator service on its own address; when the
//             job's final checkpoint is complete and its metrics written
//             (a chief restarted after the job finished), stop there. Else
//             wait for every PS (naming any that never answers), then: when
//             every PS serves initialised variables of one generation (the
//             chief restarted, the PS did not), carry on with them; else
//             restore the variables from the newest complete checkpoint in
//             output_dir (falling back to older ones when a shard fails its
//             checks, setting the bad one aside), or create and initialise
//             them and write the checkpoint of step 0. Restores go to a
//             generation above any a PS or an earlier chief (output_dir/
//             generation, written before the PS are told) has seen, so
//             generations only move forward. Then checkpoint every
//             job.checkpoint_every_secs seconds and/or
//             job.checkpoint_every_steps global steps (coordinator/checkpointer.h),
//             and watch the PS by heartbeat, on threads of their own. A PS
//             that stops answering and comes back empty (restarted at the
//             same address) gets the newest complete checkpoint, and every
//             other PS is rolled back to the same step under a new
//             generation, which tells the training replicas to carry on
//             from there (train/trainer.h). A PS away longer than
//             options.ps_wait fails the job, naming it;
//   Finish(): wait for every training replica (chief:0 when it trains, the
//             workers) to report done (async jobs: make up the steps of
//             finished replicas that a restore rolled back), write the final
//             checkpoint, score the final parameters on the test set, write
//             output_dir/final_metrics.json and output_dir/eval summaries,
//             and tell every PS to exit. The PS watch runs until then: a PS
//             lost in this final phase is waited for and restored, and the
//             phase starts again (within options.ps_wait). For a job that had
//             finished before Start, it stops the PS still answering and
//             returns the metrics on disk.
// ChiefDuties composes the parts that do this, each tested on its own
// against PS in the test's process: PsKeeper (take-over, checkpoints,
// restores), PsWatch (heartbeats), CheckpointLoop, JobFinisher (the end),
// and JobTracker with the Coordinator service (the replicas' reports).
// Thread-compatible: call Start, then Finish, from one thread.
#ifndef PSTRAIN_COORDINATOR_CHIEF_DUTIES_H_
#define PSTRAIN_COORDINATOR_CHIEF_DUTIES_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/remote_store.h"
#include "transport/grpc_server.h"
#include "base/dir_lock.h"
#include "base/json.h"
#include "cluster/tf_config.h"
#include "coordinator/checkpoint_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_finisher.h"
#include "coordinator/ps_keeper.h"
#include "coordinator/ps_watch.h"
#include "data/dataset.h"
#include "model/job_spec.h"
#include "model/network.h"
#include "train/replica.h"

namespace pstrain::coordinator {

struct ChiefOptions {
  model::JobSpec job;
  std::string output_dir = "./output";
  std::string bind_address;  // where the Coordinator service listens
  // 2 minutes: PS processes start in well under a second; containers being
  // scheduled may take longer.
  absl::Duration ps_wait = absl::Minutes(2);
  // 24 hours: the longest a job may train before the chief gives up.
  absl::Duration job_timeout = absl::Hours(24);
  // TLS and token for the Coordinator server and the PS channels.
  std::shared_ptr<const Security> security;
  // How long a replica whose done report a restore rolled back (a whole job
  // relaunched from its output directory) has to Join and train again
  // before the report is taken as final (coordinator.h).
  absl::Duration rejoin_grace = absl::Seconds(10);
  // With an evaluator in the cluster, how long Finish waits, after the PS
  // are stopped, for it to score the final checkpoint (<output_dir>/eval/
  // scored): a platform that ends a job when its chief exits (TFJob) would
  // otherwise remove the evaluator before the final score exists. Zero: no
  // wait.
  absl::Duration eval_wait = absl::Minutes(10);
  // What run.json records of this launch besides the job and the model
  // (job/run_info.h: version, flags, cluster, model config text).
  Json run = Json::object();
  // A failure for good that run.json cannot record (the output directory is
  // read-only, say): how long the chief goes on answering it to the tasks
  // that ask (Join, JobOutcome) before it exits, unless every worker and
  // evaluator has asked sooner (TellEveryTask).
  absl::Duration tell_wait = absl::Seconds(8);
};

class ChiefDuties {
 public:
  // Errors: Unavailable when the coordinator address cannot be bound;
  // DeadlineExceeded naming each PS that never answered; errors of the
  // CreateVariables RPC naming the PS.
  static absl::StatusOr<std::unique_ptr<ChiefDuties>> Start(const TfConfig& cfg,
                                                            const ChiefOptions& options);
  ~ChiefDuties();

  // SIGTERM and SIGINT from now on: a checkpoint of the step reached,
  // logged, then the process exits 128 + the signal's number. Call once,
  // from the main thread, after Start.
  void CheckpointOnStopSignals();

  // Why the job failed (JobTracker::Fail: a task refused as it joined, a PS
  // lost), or OK. When its own training fails, the task with chief duties
  // reports this rather than what its training ran into.
  absl::Status failure() const { return tracker_.failure(); }

  // For the task with chief duties when it trains too: record its own
  // result without an RPC.
  absl::Status ReportLocal(const v1::ReportDoneRequest& report) {
    return tracker_.MarkDone(report);
  }
  // For the task with chief duties when it trains too: whether it is done
  // (JobTracker::Join): it finished training under an earlier run of the
  // chief and no restore rolled that back since, or the job finished.
  absl::StatusOr<bool> JoinLocal(const TaskId& task) { return tracker_.Join(task); }

  // Returns the metrics it wrote: {"test_accuracy", "test_loss",
  // "test_examples", "global_step", "examples" (every replica's),
  // "training_seconds" (the first replica's start to the last one's end),
  // "examples_per_sec" (examples over training_seconds), "replicas": [{"replica",
  // "task", "steps", "examples", "final_loss", "examples_per_sec"}...],
  // "seconds" (since Start), "global_steps_expected" (what the replicas'
  // schedules add up to), "global_steps_rolled_back" (by restores),
  // "global_steps_lost" (expected less global_step: rolled back after the
  // replica that ran them finished, and not made up), "global_steps_made_up"
  // (async: the chief trained a finished replica's rolled-back steps
  // again), "dropped_gradients",
  // "staleness_histogram"}. The PS are told to
  // exit when the job finished, or failed for good (StopParameterServers).
  // Then, with an evaluator in the cluster, it waits up to
  // options.eval_wait for the final checkpoint's score, logging what it
  // waits for and how that ended.
  // Last, "ended" and "outcome" are added to output_dir/run.json.
  absl::StatusOr<Json> Finish();

  // After Start, the rest of the task's work: with `replica` (the chief
  // trains, or worker 0 has the duties), trains this task with those
  // options unless it finished before this start (JoinLocal), and records
  // its report (ReportLocal); then Finish. When its training fails after
  // the job had failed (a task refused), the job's failure is the answer.
  // Any failure stops the PS with the job's code, the job's end recorded
  // first, unless it is retryable. Null `replica`: the chief does not train.
  absl::StatusOr<Json> TrainAndFinish(train::ReplicaOptions* replica);

 private:
  ChiefDuties(const TfConfig& cfg, const ChiefOptions& options);

  // Start, part by part: the output directory and the test split (Prepare);
  // then (Begin) the Coordinator service, the PS clients and parts, the
  // take-over.
  absl::Status Prepare();
  absl::Status Begin();
  absl::Status Serve();
  absl::Status ConnectParts();

  // The metrics on disk when the job under `dir` finished (its final
  // checkpoint complete, final_metrics.json of that step written); none
  // otherwise.
  // ... of `schedule` (ScheduleKey), its final checkpoint written by
  // placement.num_ps PS and reading back whole.
  static absl::StatusOr<std::optional<Json>> FinishedJob(const std::string& dir,
                                                         const std::string& schedule,
                                                         const Placement& placement);
  // What decides the replicas' steps (epochs, batch, mode, replicas, PS,
  // model size, seed), in one line: final_metrics.json's "schedule".
  std::string ScheduleKey() const;
  // Adds the run's end to run.json, once (from the thread that stops the PS,
  // or Finish).
  void RecordEnd(const absl::Status& outcome);
  // For a failure for good that run.json does not hold (the output
  // directory cannot be written, or another job's lock kept this chief
  // from it): tells the job's tasks another way. With `stop_ps`, every PS
  // is told to exit with the job's code; the Coordinator service (served
  // now if it was not) answers every Join and JobOutcome with the failure
  // until every worker (but this task) and evaluator of the cluster has
  // asked, or options_.tell_wait has passed.
  void TellEveryTask(const absl::Status& why, bool stop_ps);
  // The job failed with `why`: unless that is retryable, records its end and
  // stops the PS (JobFinisher::StopParameterServers, which waits for an
  // absent PS only with `wait_for_ps`), then, when run.json could not take
  // the record, tells the tasks (TellEveryTask).
  void EndWithFailure(const absl::Status& why, bool wait_for_ps);

  const TfConfig cfg_;
  const ChiefOptions options_;
  absl::Time started_;
  // Held from Start until these duties end (the process's exit at the
  // latest): no other job's chief may use output_dir meanwhile.
  std::unique_ptr<DirLock> dir_lock_;
  JobTracker tracker_;
  CoordinatorServiceImpl service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<model::Network> net_;
  Placement placement_;
  // The test split, read in Start before anything is written: a job whose
  // data cannot be read fails before its first checkpoint.
  data::Dataset test_;
  // Set by Start for a job that had finished: its metrics.
  std::optional<Json> finished_;
  std::atomic<bool> end_recorded_{false};  // RecordEnd
  std::atomic<bool> end_unrecorded_{false};  // RecordEnd could not write it
  // Prepare found the output directory held by another job's chief: this
  // task is not that job's, and tells its tasks nothing.
  bool held_elsewhere_ = false;
  // The PS: their control plane, and the final values read as an observer.
  std::unique_ptr<client::PsAdmin> admin_;
  std::unique_ptr<client::PsClient> reader_;
  std::unique_ptr<client::RemoteStore> observer_;
  // The parts; destroyed in reverse: the loops stop before what they use.
  std::unique_ptr<PsKeeper> keeper_;
  std::unique_ptr<JobFinisher> finisher_;
  std::unique_ptr<PsWatch> watch_;
  std::unique_ptr<CheckpointLoop> checkpoints_;
};

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_CHIEF_DUTIES_H_
