#include "coordinator/job_finisher.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/event_file.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "job/final_score.h"
#include "job/job_description.h"
#include "model/embeddings.h"

namespace pstrain::coordinator {

JobFinisher::JobFinisher(client::PsAdmin* admin, PsKeeper* keeper, JobTracker* tracker,
                         client::ParameterStore* observer, model::Network* net,
                         const data::Dataset* test, JobFinisherOptions options)
    : admin_(admin),
      keeper_(keeper),
      tracker_(tracker),
      observer_(observer),
      net_(net),
      test_(test),
      options_(std::move(options)) {}

void JobFinisher::StopParameterServers(const absl::Status& why, bool wait) {
  StopParameterServersWithin(why, wait ? options_.ps_wait : absl::ZeroDuration());
}

void JobFinisher::StopParameterServersWithin(const absl::Status& why, absl::Duration wait) {
  // What the job came to, as the chief judges it.
  const int code = RoleExitCode(why, FailureKind::kPermanent);
  if (code >= kExitRetryable) {
    Log("leaving the ps running: the failure is retryable (exit ", code,
        ") and a restarted task needs them");
    return;
  }
  // Told once: the watch may have stopped them for a failed job already.
  if (ps_stopped_.exchange(true)) return;
  if (options_.quiet_checkpoints) options_.quiet_checkpoints();
  if (options_.record_end) options_.record_end(why);
  // A PS away now (restarted by an orchestrator) is waited for, within
  // ps_wait, to be told as well.
  absl::Status s = admin_->ShutdownAll(why.ok() ? "job finished" : "job failed", code, wait);
  if (!s.ok()) Log("stopping the ps: ", s.message());
  // A failed job asks its PS nothing more: a checkpoint under way ends now
  // rather than at its deadline on a PS that has gone.
  if (!why.ok()) admin_->CancelCalls();
}

Json JobFinisher::FinishedBefore(Json metrics) {
  // The PS that finished with an earlier run of the chief are not waited
  // for long, but a few seconds: a relaunch of the whole job (pstrain
  // launch) starts its PS beside this chief, which finds nothing to do
  // before they serve, and they would otherwise wait for a chief that has
  // gone.
  StopParameterServersWithin(absl::OkStatus(), std::min(options_.ps_wait, absl::Seconds(5)));
  WaitForEvaluator(FindMember(metrics, "global_step")->get<int64_t>());
  return metrics;
}

absl::Status JobFinisher::Fail(absl::Status why) {
  if (options_.stop_watch) options_.stop_watch();
  StopParameterServers(why);
  return why;
}

absl::StatusOr<Json> JobFinisher::Finish() {
  // Sync with backup replicas: the steps are done once replicas_to_aggregate
  // replicas finished; a lost backup is not waited for beyond a grace time.
  const model::JobSpec& job = options_.job;
  const int replicas = static_cast<int>(tracker_->replicas().size());
  const bool backups = job.consistency.sync() && job.replicas_to_aggregate > 0 &&
                       job.replicas_to_aggregate < replicas;
  absl::Status waited =
      tracker_->WaitForAll(options_.job_timeout, backups ? job.replicas_to_aggregate : 0,
                           absl::Seconds(std::min(30, job.sync_wait_secs)));
  if (options_.stop_checkpoints) options_.stop_checkpoints();
  if (!waited.ok()) return Fail(waited);
  return FinalPhase();
}

absl::StatusOr<Json> JobFinisher::FinalPhase() {
  // The final checkpoint (what a relaunch of the finished job resumes
  // from), the score, the metrics. The PS watch goes on: a PS lost now is
  // waited for and restored as during training, and the phase starts
  // again, within ps_wait.
  Log("every replica is done; writing the final checkpoint and scoring it");
  absl::Time trouble_since = absl::InfiniteFuture();
  while (true) {
    // Before each try: a restore (in this phase too) rolled back finished
    // replicas' steps.
    if (absl::Status s = MakeUpRolledBack(); !s.ok()) return Fail(s);
    absl::StatusOr<Json> scored = ScoreFinal();
    if (scored.ok()) {
      if (options_.stop_watch) options_.stop_watch();
      StopParameterServers(absl::OkStatus());
      WaitForEvaluator(FindMember(*scored, "global_step")->get<int64_t>());
      return scored;
    }
    if (absl::Status failed = tracker_->failure(); !failed.ok()) return Fail(failed);
    const absl::StatusCode code = scored.status().code();
    if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kAborted &&
        code != absl::StatusCode::kFailedPrecondition &&
        code != absl::StatusCode::kDeadlineExceeded) {
      return Fail(scored.status());
    }
    const absl::Time now = options_.clock->Now();
    if (trouble_since == absl::InfiniteFuture()) trouble_since = now;
    if (now - trouble_since > options_.ps_wait) {
      return Fail(absl::UnavailableError(
          absl::StrCat("the final checkpoint and score failed for ",
                       absl::FormatDuration(absl::Trunc(now - trouble_since, absl::Seconds(1))),
                       " (--ps_wait_s): ", scored.status().message())));
    }
    Log("final phase: ", scored.status().message(),
        "; trying again once the ps are back (the watch restores a ps that lost its variables)");
    options_.clock->SleepFor(options_.poll);
  }
}

absl::Status JobFinisher::MakeUpRolledBack() {
  // Async steps are each replica's own: the chief runs a finished replica's
  // shard from the restored step, as that replica would have. Sync steps are
  // the job's (the replicas still training redo them); ssp replicas wait for
  // each other, which a replica run alone after the rest cannot.
  if (!options_.job.consistency.async() || !options_.train_replica) return absl::OkStatus();
  // A restore during a make-up rolls back those made up before it: a few
  // rounds at most.
  for (int round = 0; round < 5; ++round) {
    const int64_t generation = tracker_->generation();
    std::vector<int> stale;
    for (const auto& [replica, report] : tracker_->reports()) {
      if (report.generation() != generation) stale.push_back(replica);
    }
    if (stale.empty()) return absl::OkStatus();
    for (int replica : stale) {
      const TaskId task = tracker_->replicas()[replica];
      Log("making up the steps of ", task.ToString(),
          ": a restore rolled its updates back after it finished, and it is not training "
          "again; the chief trains its shard from the restored step");
      PSTRAIN_ASSIGN_OR_RETURN(v1::ReportDoneRequest report, options_.train_replica(task));
      made_up_.fetch_add(report.steps(), std::memory_order_relaxed);
      PSTRAIN_RETURN_IF_ERROR(tracker_->MarkDone(report));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> JobFinisher::ScoreFinal() {
  PSTRAIN_RETURN_IF_ERROR(keeper_->CheckpointNow(/*final=*/true));
  std::vector<float> params(net_->num_parameters());
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step, observer_->PullAll(params.data()));
  // The embeddings' rows come from the PS, a chunk's ids at a time.
  PSTRAIN_ASSIGN_OR_RETURN(
      model::BatchResult r,
      model::EvaluateExamples(
          net_->embeddings(),
          [&](const std::string& table, absl::Span<const int64_t> ids, float* out) {
            const client::TableRows rows[] = {{table, ids, out, nullptr}};
            return observer_->PullRows(rows);
          },
          *test_, 1024,
          [&](const float* in, const int32_t* labels, int n) {
            return net_->Evaluate(params.data(), in, labels, n);
          }));
  Json metrics = DescribeScore(r, step);
  metrics["schedule"] = options_.schedule;
  const int64_t expected = DescribeReplicas(metrics, step);
  auto stats = admin_->Stats();
  if (stats.ok()) {
    DescribeStaleness(*stats, metrics);
    // Nothing applied twice, from the PS's own counts: a job whose
    // parameters took an update more than once is not the job scheduled.
    PSTRAIN_RETURN_IF_ERROR(CheckAppliedOnce(*stats, metrics, step, expected));
  }
  const int64_t lost = std::max<int64_t>(0, expected - step);
  if (lost > 0) {
    Log("the job ends ", lost, " global steps short of its schedule (", step, " of ", expected,
        "): updates rolled back by a restore after the replicas that made them had finished");
  }
  // The run's settings beside its results (run.json has the rest).
  metrics["job"] = DescribeJob(options_.job);
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
  // With an evaluator in the cluster, output_dir/eval is its to write. One
  // the cluster does not list may have scored this step already, or score
  // it later: the step is written once (EventWriter::WriteScalarsOnce).
  if (!options_.has_evaluator) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval,
                             EventWriter::Open(options_.output_dir + "/eval"));
    PSTRAIN_ASSIGN_OR_RETURN(const bool wrote, eval->WriteScalarsOnce(step, r.ScoreScalars()));
    if (!wrote) Log("eval summary of step ", step, ": an evaluator wrote it already");
  }
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(options_.output_dir + "/final_metrics.json", metrics.dump() + "\n"));
  return metrics;
}

int64_t JobFinisher::DescribeReplicas(Json& metrics, int64_t step) const {
  Json replicas = Json::array();
  // The job's throughput: every replica's examples over the wall time from
  // the first replica's start to the last one's end (not the sum of their
  // rates, which overstates it when replicas run for different times).
  int64_t examples = 0;
  double first_start = 0, last_end = 0;
  int64_t expected = 0;
  for (const auto& [replica, rep] : tracker_->reports()) {
    Json w = Json::object();
    w["replica"] = replica;
    w["task"] = absl::StrCat(rep.task_type(), ":", rep.task_index());
    w["steps"] = rep.steps();
    w["examples"] = rep.examples();
    w["final_loss"] = rep.final_loss();
    w["examples_per_sec"] = rep.examples_per_sec();
    examples += rep.examples();
    if (rep.train_end_unix() > 0) {
      first_start =
          first_start == 0 ? rep.train_start_unix() : std::min(first_start, rep.train_start_unix());
      last_end = std::max(last_end, rep.train_end_unix());
    }
    // Sync steps are the job's (every replica runs them together); async
    // and ssp steps each replica's own, each one global step.
    expected = options_.job.consistency.sync() ? std::max(expected, rep.schedule_steps())
                                                  : expected + rep.schedule_steps();
    replicas.push_back(std::move(w));
  }
  metrics["replicas"] = std::move(replicas);
  metrics["seconds"] = absl::ToDoubleSeconds(options_.clock->Now() - options_.started);
  // What faults cost: global steps rolled back by restores, and those the
  // job ends without (rolled back after the replica that ran them finished).
  metrics["global_steps_expected"] = expected;
  metrics["global_steps_rolled_back"] = keeper_->rolled_back();
  metrics["global_steps_lost"] = std::max<int64_t>(0, expected - step);
  metrics["global_steps_made_up"] = made_up();
  const double wall = last_end - first_start;
  metrics["training_seconds"] = wall;
  metrics["examples"] = examples;
  metrics["examples_per_sec"] = wall > 0 ? examples / wall : 0.0;
  metrics["mode"] = "ps";
  return expected;
}

absl::Status JobFinisher::CheckAppliedOnce(const std::vector<v1::StatsResponse>& stats,
                                           Json& metrics, int64_t step, int64_t expected) const {
  int64_t repeated = 0;
  for (const v1::StatsResponse& ps : stats) {
    for (const v1::SliceStats& slice : ps.slices()) repeated += slice.repeated_pushes();
  }
  metrics["repeated_pushes_not_applied"] = repeated;
  if (options_.job.consistency.sync()) {
    // Sync steps are the job's: its rounds, none beyond the schedule.
    if (step > expected) {
      return absl::InternalError(absl::StrCat(
          "the job ran ", step, " sync rounds but its schedule has ", expected,
          ": rounds beyond the schedule were applied; the parameters are not the job's"));
    }
    return absl::OkStatus();
  }
  // Async and ssp: each replica's pushes applied in every dense slice
  // (SliceStats.replica_pushes) are at most its schedule's steps.
  const std::map<int, v1::ReportDoneRequest> reports = tracker_->reports();
  int64_t applied = 0;
  std::vector<std::string> twice;
  for (const auto& [replica, report] : reports) {
    int64_t most = -1, fewest = -1;
    for (const v1::StatsResponse& ps : stats) {
      for (const v1::SliceStats& slice : ps.slices()) {
        if (replica >= slice.replica_pushes_size()) continue;  // a table, or no counts
        const int64_t n = slice.replica_pushes(replica);
        most = std::max(most, n);
        fewest = fewest < 0 ? n : std::min(fewest, n);
      }
    }
    if (most < 0) continue;
    applied += fewest;
    if (most > report.schedule_steps()) {
      twice.push_back(absl::StrCat(report.task_type(), ":", report.task_index(), " ", most,
                                   " pushes applied of its ", report.schedule_steps()));
    }
  }
  metrics["updates_applied"] = applied;
  if (!twice.empty()) {
    return absl::InternalError(absl::StrCat(
        "updates were applied more than once (global step ", step, ", schedule ", expected,
        "): ", absl::StrJoin(twice, "; "), "; the parameters are not the job's"));
  }
  return absl::OkStatus();
}

void JobFinisher::DescribeStaleness(const std::vector<v1::StatsResponse>& stats, Json& metrics) {
  // Gradients dropped as stale, and the staleness of those applied (summed
  // over every slice; buckets as SliceStats says).
  int64_t dropped = 0;
  std::vector<int64_t> histogram;
  for (const v1::StatsResponse& ps : stats) {
    for (const v1::SliceStats& slice : ps.slices()) {
      dropped += slice.dropped_stale();
      if (histogram.size() < static_cast<size_t>(slice.staleness_histogram_size())) {
        histogram.resize(slice.staleness_histogram_size());
      }
      for (int b = 0; b < slice.staleness_histogram_size(); ++b) {
        histogram[b] += slice.staleness_histogram(b);
      }
    }
  }
  metrics["dropped_gradients"] = dropped;
  Json h = Json::array();
  Json labels = Json::array();
  for (size_t b = 0; b < histogram.size(); ++b) {
    h.push_back(histogram[b]);
    // Bucket b counts staleness 0, 1, 2, then 2^(b-2)+1 .. 2^(b-1).
    labels.push_back(b <= 2 ? std::to_string(b)
                            : absl::StrCat((int64_t{1} << (b - 2)) + 1, "-",
                                           int64_t{1} << (b - 1)));
  }
  metrics["staleness_histogram"] = std::move(h);
  metrics["staleness_buckets"] = std::move(labels);
}

void JobFinisher::WaitForEvaluator(int64_t step) const {
  if (!options_.has_evaluator) return;
  WaitForFinalScore(options_.output_dir, step, options_.eval_wait, options_.poll, options_.clock);
}

}  // namespace pstrain::coordinator
