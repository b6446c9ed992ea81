// How the chief ends a job: waits for every training replica to report
// done (sync with backup replicas: for replicas_to_aggregate of them), makes
// up the steps of finished async replicas that a restore rolled back,
// writes the final checkpoint, scores the final parameters on the test
// split, writes final_metrics.json (and, without an evaluator, the eval
// summaries), tells every PS to exit, and, with an evaluator, waits for its
// score of the final checkpoint. A PS lost in the final phase is waited
// for (the PS watch restores it) and the phase starts again, within
// ps_wait; a job that failed for good stops the PS with its exit code.
// Thread-compatible: Finish once, from one thread; StopParameterServers
// from any.
#ifndef PSTRAIN_COORDINATOR_JOB_FINISHER_H_
#define PSTRAIN_COORDINATOR_JOB_FINISHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/parameter_store.h"
#include "client/ps_admin.h"
#include "base/clock.h"
#include "base/json.h"
#include "coordinator/coordinator.h"
#include "coordinator/ps_keeper.h"
#include "data/dataset.h"
#include "model/job_spec.h"
#include "model/network.h"

namespace pstrain::coordinator {

struct JobFinisherOptions {
  model::JobSpec job;
  std::string output_dir;
  absl::Duration ps_wait = absl::Minutes(2);
  absl::Duration job_timeout = absl::Hours(24);
  // With an evaluator: how long to wait for its score of the final
  // checkpoint (<output_dir>/eval/scored) after the PS are stopped; its
  // summaries are its own to write. Zero: no wait.
  bool has_evaluator = false;
  absl::Duration eval_wait = absl::Minutes(10);
  // final_metrics.json's "schedule": what decides the replicas' steps.
  std::string schedule;
  absl::Time started;
  // How often a wait looks again, and the clock waits run on.
  absl::Duration poll = absl::Milliseconds(500);
  const Clock* clock = Clock::Real();
  // Trains `task`'s shard again from the restored step (async make-up);
  // returns its done report. Null: rolled-back steps are not made up.
  std::function<absl::StatusOr<v1::ReportDoneRequest>(const TaskId& task)> train_replica;
  // Stops the chief's checkpoint loop and PS watch (they end before the
  // final checkpoint and after the final phase respectively).
  std::function<void()> stop_checkpoints;
  std::function<void()> stop_watch;
  // Tells the checkpoint loop to end without waiting (CheckpointLoop::
  // RequestStop), before the PS are stopped: a periodic checkpoint would
  // only fail on PS that are going ("Connection refused").
  std::function<void()> quiet_checkpoints;
  // Records on disk how the job ended (well, or failed for good) before any
  // PS is told to stop (job/run_record.h, EndedWell and EndedBadly: a task
  // that waits for the chief or a PS, or starts after the end, finds it
  // and exits with the job's code instead of waiting for tasks that have
  // gone). Null: none.
  std::function<void(const absl::Status& outcome)> record_end;
};

class JobFinisher {
 public:
  // Everything given must outlive the finisher. `observer` reads the final
  // values (replica -1); `net` scores them on `test`.
  JobFinisher(client::PsAdmin* admin, PsKeeper* keeper, JobTracker* tracker,
              client::ParameterStore* observer, model::Network* net,
              const data::Dataset* test, JobFinisherOptions options);

  // Ends the job as the top of this file says; the metrics written (see
  // ChiefDuties::Finish). Errors: the job's failure, or the final phase's.
  absl::StatusOr<Json> Finish();

  // For a job that had finished before this chief started: stops the PS
  // still answering, waits for the evaluator, returns `metrics`.
  Json FinishedBefore(Json metrics);

  // Tells every PS to exit ("job finished" with 0 when `why` is OK, "job
  // failed" with RoleExitCode(why, kPermanent) otherwise), unless that code is
  // retryable: then the PS are left running, for the retried chief (or
  // worker) needs them, and an orchestrator that restarts by exit code
  // would not restart a PS that exited 0. A PS not answering is tried
  // again within ps_wait (it may be restarting), or within `wait` for the
  // second form. Once only; logs what it did.
  void StopParameterServers(const absl::Status& why, bool wait = true);
  void StopParameterServersWithin(const absl::Status& why, absl::Duration wait);

  // Steps made up for rolled-back replicas (MakeUpRolledBack).
  int64_t made_up() const { return made_up_.load(std::memory_order_relaxed); }

 private:
  // Async jobs: trains, as each finished replica whose report a restore
  // rolled back since (and which did not Join again), its shard from the
  // restored step.
  absl::Status MakeUpRolledBack();
  // The final checkpoint, the score of the parameters, final_metrics.json.
  absl::StatusOr<Json> ScoreFinal();
  // The replicas' reports and the fault counts in `metrics`; the global
  // steps the schedules add up to.
  int64_t DescribeReplicas(Json& metrics, int64_t step) const;
  // What the PS saw: dropped gradients, the staleness histogram.
  void DescribeStaleness(const std::vector<v1::StatsResponse>& stats, Json& metrics);
  // Internal, naming each replica and both counts, when any update was
  // applied more than once: async and ssp, a replica's pushes applied in
  // some dense slice beyond its schedule's steps; sync, rounds beyond the
  // schedule. Adds updates_applied (async, ssp: every replica's pushes
  // applied in all dense slices) and repeated_pushes_not_applied to
  // `metrics`.
  absl::Status CheckAppliedOnce(const std::vector<v1::StatsResponse>& stats, Json& metrics,
                                int64_t step, int64_t expected) const;
  // With an evaluator, the wait for its score of step `step`
  // (job/final_score.h).
  void WaitForEvaluator(int64_t step) const;
  // Finish after every report: the final phase, tried again while PS are
  // being restored.
  absl::StatusOr<Json> FinalPhase();
  absl::Status Fail(absl::Status why);

  client::PsAdmin* const admin_;
  PsKeeper* const keeper_;
  JobTracker* const tracker_;
  client::ParameterStore* const observer_;
  model::Network* const net_;  // scoring uses its buffers
  const data::Dataset* const test_;
  const JobFinisherOptions options_;
  std::atomic<bool> ps_stopped_{false};
  std::atomic<int64_t> made_up_{0};
};

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_JOB_FINISHER_H_
