#include "coordinator/chief_duties.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_shard.h"
#include "common/checkpoint_layout.h"
#include "common/event_file.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "coordinator/checkpointer.h"
#include "data/dataset.h"
#include "data/input.h"
#include "job/run_record.h"
#include "model/embeddings.h"
#include "train/replica.h"

namespace pstrain::coordinator {

ChiefDuties::ChiefDuties(const TfConfig& cfg, const ChiefOptions& options)
    : cfg_(cfg),
      options_(options),
      tracker_(cfg.cluster, options.job.chief_trains),
      service_(&tracker_, options.security) {}

namespace {

// The chief a stop signal checkpoints (CheckpointOnStopSignals); cleared
// by its destructor, which waits for a checkpoint in progress.
absl::Mutex signal_mu(absl::kConstInit);
ChiefDuties* signal_target ABSL_GUARDED_BY(signal_mu) = nullptr;

// How long a checkpoint may hold the PS's pushes: the hold lasts from the
// HoldPushes answers to each PS's cut (milliseconds); the lease only bounds
// the stall should this chief die in between.
constexpr absl::Duration kPushHoldLease = absl::Seconds(10);

}  // namespace

void ChiefDuties::CheckpointOnStopSignals() {
  {
    absl::MutexLock lock(&signal_mu);
    signal_target = this;
  }
  WatchStopSignals([](int signo) {
    absl::MutexLock lock(&signal_mu);
    if (signal_target != nullptr) {
      Log("signal ", signo, ": writing a checkpoint of the step reached before stopping");
      const absl::Status s = signal_target->CheckpointNow(/*final=*/false);
      if (s.ok()) {
        Log("checkpoint written; exiting with ", 128 + signo);
      } else {
        Log("the checkpoint on signal ", signo, " failed: ", s.message(), "; exiting with ",
            128 + signo);
      }
    }
    std::fflush(nullptr);
    std::_Exit(128 + signo);
  });
}

ChiefDuties::~ChiefDuties() {
  {
    absl::MutexLock lock(&signal_mu);
    if (signal_target == this) signal_target = nullptr;
  }
  StopCheckpointing();
  StopWatching();
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

void ChiefDuties::StopCheckpointing() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (checkpointer_.joinable()) checkpointer_.join();
}

void ChiefDuties::StopWatching() {
  {
    absl::MutexLock lock(&mu_);
    watch_stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

namespace {

// <output_dir>/generation: the highest recovery generation a chief of this
// job has handed out, written before the PS are told it.
std::string GenerationPath(const std::string& dir) { return dir + "/generation"; }

absl::StatusOr<int64_t> ReadGeneration(const std::string& dir) {
  auto text = ReadFile(GenerationPath(dir));
  if (text.status().code() == absl::StatusCode::kNotFound) return 0;
  if (!text.ok()) return text.status();
  int64_t generation = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &generation) || generation < 0) {
    return absl::DataLossError(absl::StrCat(GenerationPath(dir), " does not hold a generation: \"",
                                            absl::CEscape(text->substr(0, 40)), "\""));
  }
  return generation;
}

}  // namespace

absl::StatusOr<int64_t> ChiefDuties::NextGeneration() {
  const int64_t next = generation_ + 1;
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(GenerationPath(options_.output_dir), absl::StrCat(next, "\n")));
  generation_ = next;
  return next;
}

absl::StatusOr<int64_t> ChiefDuties::GlobalStep() {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, client_->Stats());
  int64_t step = -1;
  for (const v1::StatsResponse& s : stats) {
    step = step < 0 ? s.global_step() : std::min(step, s.global_step());
  }
  return step;
}

absl::Status ChiefDuties::CheckpointNow(bool final) {
  absl::MutexLock ps_lock(&ps_mu_);
  return CheckpointNowLocked(final);
}

absl::Status ChiefDuties::CheckpointNowLocked(bool final) {
  {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t now, GlobalStep());
    absl::MutexLock lock(&mu_);
    if (now <= last_checkpoint_ && !final) return absl::OkStatus();
  }
  // Every PS cut at one moment: their pushes held from before the step is
  // read until each one's snapshot is taken, so a replica's pushes in the
  // shards differ by at most the one it had in flight.
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, client_->HoldPushes(kPushHoldLease));
  PSTRAIN_ASSIGN_OR_RETURN(
      CheckpointRecord r,
      SaveCheckpoint(client_.get(), options_.output_dir, step, options_.job.keep_checkpoints, final,
                     /*spare_unscored=*/!cfg_.cluster.evaluator.empty(), absl::Minutes(10),
                     /*release_hold=*/true));
  Log(absl::StrFormat("checkpoint at step %d: %d bytes in %.3fs (ps: %.3fs) under %s", r.step,
                      r.bytes, r.seconds, r.ps_seconds, options_.output_dir));
  absl::MutexLock lock(&mu_);
  last_checkpoint_ = step;
  return absl::OkStatus();
}

void ChiefDuties::CheckpointLoop() {
  const model::JobSpec& job = options_.job;
  absl::Time last_time = absl::Now();
  while (true) {
    int64_t last_step;
    {
      absl::MutexLock lock(&mu_);
      // Wakes every 200 ms to look at the step, or at once to stop.
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200));
      if (stopping_) return;
      // No checkpoint while a PS is away: it would fail, and hold up the
      // restore that follows its return.
      if (ps_down_ > 0) continue;
      last_step = std::max<int64_t>(last_checkpoint_, 0);
    }
    bool due = job.checkpoint_every_secs > 0 &&
               absl::Now() - last_time >= absl::Seconds(job.checkpoint_every_secs);
    if (!due && job.checkpoint_every_steps > 0) {
      auto step = GlobalStep();
      if (!step.ok()) continue;
      due = *step >= last_step + job.checkpoint_every_steps;
    }
    if (!due) continue;
    last_time = absl::Now();
    // A failed checkpoint is reported and tried again later; the job goes on.
    if (absl::Status s = CheckpointNow(); !s.ok()) Log("checkpoint failed: ", s.message());
  }
}

absl::StatusOr<std::unique_ptr<ChiefDuties>> ChiefDuties::Start(const TfConfig& cfg,
                                                                const ChiefOptions& options) {
  std::unique_ptr<ChiefDuties> chief(new ChiefDuties(cfg, options));
  chief->started_ = absl::Now();
  PSTRAIN_ASSIGN_OR_RETURN(chief->mlp_, model::Network::Create(options.job.model, 1024));
  // Before anything in the output directory changes: a run of another
  // model there is refused, its checkpoints left as they are.
  {
    Json model = DescribeModel(chief->mlp_->variables(), options.job.optimizer.name);
    PSTRAIN_RETURN_IF_ERROR(CheckRelaunch(options.output_dir, model));
    PSTRAIN_ASSIGN_OR_RETURN(
        chief->test_, data::LoadInputSplit(options.job.data_dir, options.job.input,
                                           data::Split::kTest, options.job.model.num_classes()));
    PSTRAIN_RETURN_IF_ERROR(MakeDirs(options.output_dir));
    Json run = options.run;
    run["job"] = DescribeJob(options.job);
    run["model"] = model;
    chief->service_.SetJob(Json{{"job", run["job"]}, {"model", std::move(model)}});
    PSTRAIN_RETURN_IF_ERROR(WriteRunStart(options.output_dir, std::move(run), chief->started_));
  }
  // Replicas that reported done to an earlier run of the chief have exited;
  // their reports are on disk. Read before any new report is taken.
  PSTRAIN_ASSIGN_OR_RETURN(const int done,
                           chief->tracker_.KeepReportsIn(options.output_dir, options.rejoin_grace));
  if (done > 0) {
    Log(done, " of ", chief->tracker_.replicas().size(),
        " training replicas reported done before this start (", options.output_dir,
        "/done); those a restore has not rolled back since are not waited for again");
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      chief->server_,
      GrpcServer::Create({options.bind_address, 512 << 20, options.security}, {&chief->service_}));
  Log("coordinator serving on ", options.bind_address);
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement,
                           ComputePlacement(chief->mlp_->variables(), cfg.cluster.ps.size()));
  client::PsClientOptions client_options;
  client_options.ps_addresses = cfg.cluster.ps;
  client_options.replica = -1;  // this client only observes; training has its own
  client_options.security = options.security;
  PSTRAIN_ASSIGN_OR_RETURN(chief->client_, client::PsClient::Create(client_options, placement));
  // A job that finished (its final checkpoint complete, its metrics written)
  // needs no PS: they may have exited already.
  PSTRAIN_ASSIGN_OR_RETURN(chief->finished_,
                           FinishedJob(options.output_dir, chief->ScheduleKey(), placement));
  if (chief->finished_.has_value()) {
    chief->tracker_.SetFinished();
    return chief;
  }
  Log("waiting for ", cfg.cluster.ps.size(), " ps");
  PSTRAIN_RETURN_IF_ERROR(chief->client_->WaitUntilReady(options.ps_wait, false));
  {
    absl::MutexLock ps_lock(&chief->ps_mu_);
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t serving, chief->TakeOverPs());
    chief->tracker_.SetGeneration(serving);
  }
  ChiefDuties* self = chief.get();
  chief->watcher_ = std::thread([self] { self->WatchLoop(); });
  if (options.job.checkpoint_every_secs > 0 || options.job.checkpoint_every_steps > 0) {
    chief->checkpointer_ = std::thread([self] { self->CheckpointLoop(); });
  }
  return chief;
}

std::string ChiefDuties::ScheduleKey() const {
  const model::JobSpec& job = options_.job;
  return absl::StrCat("epochs=", job.epochs, " max_steps=", job.max_steps,
                      " batch_size=", job.batch_size, " consistency=", job.consistency,
                      " replicas_to_aggregate=", job.replicas_to_aggregate,
                      " replicas=", tracker_.replicas().size(), " ps=", cfg_.cluster.ps.size(),
                      " parameters=", mlp_->num_parameters(), " seed=", job.seed);
}

absl::StatusOr<std::optional<Json>> ChiefDuties::FinishedJob(const std::string& dir,
                                                             const std::string& schedule,
                                                             const Placement& placement) {
  const std::optional<Json> not_finished;
  auto index = ReadCheckpointIndex(dir);
  if (!index.ok() || !index->final) return not_finished;
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(dir, nullptr);
  if (complete.empty() || complete[0].step != index->step) return not_finished;
  auto text = ReadFile(dir + "/final_metrics.json");
  if (!text.ok()) return not_finished;
  auto metrics = ParseJson(*text);
  if (!metrics.ok()) return not_finished;
  const Json* step = FindMember(*metrics, "global_step");
  const Json* key = FindMember(*metrics, "schedule");
  // Metrics of another step, or of another schedule (the job relaunched
  // for more epochs, say): not this job's end.
  if (step == nullptr || !step->is_number_integer() || step->get<int64_t>() != index->step ||
      key == nullptr || !key->is_string() || key->get<std::string>() != schedule ||
      complete[0].num_ps != placement.num_ps) {
    return not_finished;
  }
  // Every shard of it reads back whole (checksums verified); else the
  // checkpoint is restored from (and set aside) as after any failure.
  for (int ps = 0; ps < complete[0].num_ps; ++ps) {
    auto shard = ckpt::ReadShard(ShardPath(dir, index->step, ps, complete[0].num_ps));
    if (!shard.ok()) {
      Log("the job's final checkpoint (step ", index->step, ") does not read back (",
          shard.status().message(), "): not taken as finished");
      return not_finished;
    }
  }
  Log("the job already finished: its final checkpoint (step ", index->step,
      ") is complete and its metrics are in ", dir, "/final_metrics.json");
  return std::optional<Json>(*std::move(metrics));
}

absl::StatusOr<int64_t> ChiefDuties::TakeOverPs() {
  const std::string& dir = options_.output_dir;
  const int n = client_->num_ps();
  // What each PS holds now, and the highest generation handed out so far:
  // a restore must go above both, so that generations only move forward.
  PSTRAIN_ASSIGN_OR_RETURN(generation_, ReadGeneration(dir));
  int live = 0;
  int64_t live_generation = -1;
  bool one_generation = true;
  for (int ps = 0; ps < n; ++ps) {
    PSTRAIN_ASSIGN_OR_RETURN(v1::HealthResponse h, client_->Health(ps, absl::Seconds(10), true));
    generation_ = std::max(generation_, h.generation());
    if (!h.initialized()) continue;
    ++live;
    if (live_generation >= 0 && h.generation() != live_generation) one_generation = false;
    live_generation = std::max(live_generation, h.generation());
  }
  std::vector<IncompleteCheckpoint> skipped;
  const std::vector<CompleteCheckpoint> candidates = CompleteCheckpoints(dir, &skipped);
  for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
  // Every PS alive with its variables (this chief restarted, the PS did
  // not): they are ahead of any checkpoint; carry on with them.
  if (live == n && one_generation) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, GlobalStep());
    Log("every ps serves initialised variables (generation ", live_generation, ", global step ",
        step, "): carrying on with them, nothing restored");
    {
      absl::MutexLock lock(&mu_);
      last_checkpoint_ = candidates.empty() ? -1 : candidates[0].step;
      last_seen_step_ = step;
    }
    // An earlier chief died before its first checkpoint was complete.
    if (candidates.empty()) PSTRAIN_RETURN_IF_ERROR(CheckpointNowLocked(/*final=*/false));
    return live_generation;
  }
  // A job whose output directory holds a complete checkpoint resumes from it.
  if (!candidates.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t generation, NextGeneration());
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t step, RestoreNewest(candidates, generation));
    absl::MutexLock lock(&mu_);
    last_checkpoint_ = step;
    last_seen_step_ = step;
    return generation;
  }
  // No checkpoint: the variables are created. PS that hold some already (an
  // earlier chief died before its first checkpoint) keep them, and the others
  // join their generation.
  int64_t generation = live_generation;
  if (live == 0) {
    PSTRAIN_ASSIGN_OR_RETURN(generation, NextGeneration());
  }
  std::vector<int> kept;
  PSTRAIN_RETURN_IF_ERROR(client_
                              ->CreateVariables(mlp_->InitialParameters(options_.job.seed),
                                                mlp_->offsets(), CreateOptionsFor(generation),
                                                &kept)
                              .status());
  if (!kept.empty()) {
    Log(kept.size(), " of ", n, " ps already held initialised variables; they were kept");
  }
  Log("initialised ", mlp_->num_parameters(), " parameters in ", mlp_->variables().size(),
      " variables on ", n, " ps");
  // The checkpoint of step 0: what a PS lost before the first periodic
  // checkpoint comes back from.
  PSTRAIN_RETURN_IF_ERROR(CheckpointNowLocked(/*final=*/false));
  return generation;
}

client::CreateOptions ChiefDuties::CreateOptionsFor(int64_t generation) const {
  client::CreateOptions create;
  create.optimizer = options_.job.optimizer;
  create.consistency = options_.job.consistency;
  create.num_replicas = static_cast<int>(tracker_.replicas().size());
  create.replicas_to_aggregate = options_.job.replicas_to_aggregate;
  create.seed = options_.job.seed;
  create.generation = generation;
  create.sync_wait = absl::Seconds(options_.job.sync_wait_secs);
  return create;
}

absl::StatusOr<int64_t> ChiefDuties::RestoreNewest(
    const std::vector<CompleteCheckpoint>& candidates, int64_t generation) {
  const std::string& dir = options_.output_dir;
  const std::vector<float> initial = mlp_->InitialParameters(options_.job.seed);
  absl::Status last;
  for (const CompleteCheckpoint& c : candidates) {
    const absl::Time start = absl::Now();
    client::CreateOptions create = CreateOptionsFor(generation);
    create.restore_dir = dir;
    create.restore_step = c.step;
    create.restore_num_ps = c.num_ps;
    absl::Status s;
    for (int attempt = 1;; ++attempt) {
      // PS without variables create them and load the checkpoint; those that
      // already serve some (from an earlier attempt too) are then rolled back
      // to it.
      std::vector<int> kept;
      s = client_->CreateVariables(initial, mlp_->offsets(), create, &kept).status();
      if (s.ok() && !kept.empty()) {
        s = client_->Restore(kept, dir, c.step, c.num_ps, generation, absl::Minutes(10)).status();
      }
      // A file that was there a moment ago (the listing checked every shard)
      // and cannot be opened or read now: storage that hiccups (NotFound,
      // an I/O error). Tried again; the checkpoint is not damaged.
      const bool transient =
          s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kInternal;
      if (!transient || attempt == kRestoreTries) break;
      Log("restoring the checkpoint at step ", c.step, ": ", s.message(), "; trying again (",
          attempt, " of ", kRestoreTries, ")");
      absl::SleepFor(absl::Seconds(attempt));
    }
    if (s.ok()) {
      Log(absl::StrFormat(
          "restored every ps to the checkpoint at step %d in %s%s (generation %d)", c.step,
          absl::FormatDuration(absl::Now() - start),
          c.num_ps == client_->num_ps() ? "" : absl::StrCat(", re-sliced from ", c.num_ps, " ps"),
          generation));
      return c.step;
    }
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      // Written for another model (an output directory without run.json,
      // or one edited): the checkpoint is whole; the job is what differs.
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint at step ", c.step, " in ", dir, " does not fit this job (", s.message(),
          "); nothing was changed. Relaunch with the flags and --model_config "
          "that wrote it to resume, or give a new --output_dir to start afresh"));
    }
    if (s.code() != absl::StatusCode::kDataLoss) {
      // Left in place: a read that keeps failing says nothing of the files.
      return absl::Status(s.code(), absl::StrCat("restoring the checkpoint at step ", c.step,
                                                 " (left in place): ", s.message()));
    }
    // A shard that fails its checks (a checksum, a short file): the previous
    // checkpoint is used, and this one set aside so that nothing picks it up
    // again.
    SetAsideCheckpoint(dir, c.step, s.message());
    last = s;
  }
  return absl::DataLossError(absl::StrCat("no checkpoint under ", dir,
                                          " could be restored; the last error: ", last.message()));
}

void ChiefDuties::WatchLoop() {
  const int n = client_->num_ps();
  std::vector<bool> down(n, false);
  std::vector<absl::Time> down_since(n);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&watch_stopping_), kHeartbeat);
      if (watch_stopping_) return;
    }
    // A permanent failure (a task started with other job flags) ends every
    // replica's training now, this task's own too: the PS are told to exit
    // with its code, and training against them stops.
    if (absl::Status failed = tracker_.failure();
        !failed.ok() && ExitCodeFor(failed) < kExitRetryable) {
      Log("the job failed (", failed.message(), "); stopping the ps");
      StopParameterServers(failed);
      return;
    }
    std::vector<int> restarted;
    int64_t round_step = -1;  // the lowest global step of those answering this round
    bool all_answered = true;
    for (int ps = 0; ps < n; ++ps) {
      auto health = client_->Health(ps, 2 * kHeartbeat);
      const absl::Time now = absl::Now();
      if (!health.ok()) {
        all_answered = false;
        if (!down[ps]) {
          down[ps] = true;
          down_since[ps] = now;
          Log(client_->PsName(ps), " stopped answering (", health.status().message(),
              "); it gets the newest checkpoint when it is back");
          absl::MutexLock lock(&mu_);
          ++ps_down_;
        } else if (now - down_since[ps] > options_.ps_wait) {
          tracker_.Fail(absl::UnavailableError(absl::StrCat(
              client_->PsName(ps), " has not answered for ",
              absl::FormatDuration(absl::Trunc(now - down_since[ps], absl::Seconds(1))),
              " (--ps_wait_s): ", health.status().message())));
          return;
        }
        continue;
      }
      if (down[ps]) {
        down[ps] = false;
        absl::MutexLock lock(&mu_);
        --ps_down_;
      }
      // A PS without variables was restarted: it lost its part of the model.
      if (!health->initialized()) {
        restarted.push_back(ps);
      } else {
        round_step =
            round_step < 0 ? health->global_step() : std::min(round_step, health->global_step());
      }
    }
    if (restarted.empty()) {
      // The job's global step as last seen whole: what a restore rolls back.
      if (all_answered && round_step >= 0) {
        absl::MutexLock lock(&mu_);
        last_seen_step_ = std::max(last_seen_step_, round_step);
      }
      continue;
    }
    absl::MutexLock ps_lock(&ps_mu_);
    std::vector<IncompleteCheckpoint> skipped;
    const std::vector<CompleteCheckpoint> candidates =
        CompleteCheckpoints(options_.output_dir, &skipped);
    for (const IncompleteCheckpoint& c : skipped) Log(c.ToString());
    auto next = NextGeneration();
    if (!next.ok()) {
      tracker_.Fail(absl::UnavailableError(
          absl::StrCat("restoring the ps after ", client_->PsName(restarted[0]),
                       " restarted: recording the next generation: ", next.status().message())));
      return;
    }
    const int64_t generation = *next;
    for (int ps : restarted) {
      Log(client_->PsName(ps), " restarted without variables (",
          down_since[ps] == absl::Time()
              ? std::string("between two heartbeats")
              : absl::StrCat("away ", absl::FormatDuration(absl::Trunc(absl::Now() - down_since[ps],
                                                                       absl::Milliseconds(1)))),
          "): restoring every ps from the newest checkpoint");
      down_since[ps] = absl::Time();
    }
    auto step = candidates.empty()
                    ? absl::StatusOr<int64_t>(absl::FailedPreconditionError(
                          absl::StrCat("no complete checkpoint under ", options_.output_dir)))
                    : RestoreNewest(candidates, generation);
    if (!step.ok()) {
      tracker_.Fail(absl::UnavailableError(absl::StrCat("restoring the ps after ",
                                                        client_->PsName(restarted[0]),
                                                        " restarted: ", step.status().message())));
      return;
    }
    tracker_.SetGeneration(generation);
    absl::MutexLock lock(&mu_);
    last_checkpoint_ = *step;
    if (last_seen_step_ > *step) {
      Log("global steps rolled back: ", last_seen_step_ - *step, " (from ", last_seen_step_, " to ",
          *step, "); replicas still training redo theirs");
      rolled_back_ += last_seen_step_ - *step;
    }
    last_seen_step_ = *step;
  }
}

void ChiefDuties::StopParameterServers(const absl::Status& why) {
  const int code = ExitCodeFor(why);
  if (code >= kExitRetryable) {
    Log("leaving the ps running: the failure is retryable (exit ", code,
        ") and a restarted task needs them");
    return;
  }
  // Told once: the watch may have stopped them for a failed job already.
  if (ps_stopped_.exchange(true)) return;
  // A PS away now (restarted by an orchestrator) is waited for, within
  // --ps_wait_s, to be told as well; one that finished with an earlier run of
  // the chief (finished_) is not.
  absl::Status s =
      client_->ShutdownAll(why.ok() ? "job finished" : "job failed", code,
                           finished_.has_value() ? absl::ZeroDuration() : options_.ps_wait);
  if (!s.ok()) Log("stopping the ps: ", s.message());
}

absl::StatusOr<Json> ChiefDuties::ScoreFinal(const data::Dataset& test) {
  PSTRAIN_RETURN_IF_ERROR(CheckpointNow(/*final=*/true));
  std::vector<float> params(mlp_->num_parameters());
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step, client_->PullAll(params.data(), mlp_->offsets()));
  // The embeddings' rows come from the PS, a chunk's ids at a time.
  PSTRAIN_ASSIGN_OR_RETURN(
      model::BatchResult r,
      model::EvaluateExamples(
          mlp_->embeddings(),
          [&](const std::string& table, absl::Span<const int64_t> ids, float* out) {
            return client_->PullRows(table, ids, out);
          },
          test.features.data(), test.ids.data(), test.labels.data(), test.num_examples,
          static_cast<int>(test.example_dim), test.ids_dim, 1024,
          [&](const float* in, const int32_t* labels, int n) {
            return mlp_->Evaluate(params.data(), in, labels, n);
          }));
  Json metrics = DescribeScore(r, step);
  metrics["schedule"] = ScheduleKey();
  Json replicas = Json::array();
  // The job's throughput: every replica's examples over the wall time from
  // the first replica's start to the last one's end (not the sum of their
  // rates, which overstates it when replicas run for different times).
  int64_t examples = 0;
  double first_start = 0, last_end = 0;
  int64_t expected = 0;
  for (const auto& [replica, rep] : tracker_.reports()) {
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
    expected = options_.job.consistency == "sync" ? std::max(expected, rep.schedule_steps())
                                                  : expected + rep.schedule_steps();
    replicas.push_back(std::move(w));
  }
  metrics["replicas"] = std::move(replicas);
  metrics["seconds"] = absl::ToDoubleSeconds(absl::Now() - started_);
  // What faults cost: global steps rolled back by restores, and those the
  // job ends without (rolled back after the replica that ran them finished).
  int64_t rolled_back, made_up;
  {
    absl::MutexLock lock(&mu_);
    rolled_back = rolled_back_;
    made_up = made_up_;
  }
  const int64_t lost = std::max<int64_t>(0, expected - step);
  metrics["global_steps_expected"] = expected;
  metrics["global_steps_rolled_back"] = rolled_back;
  metrics["global_steps_lost"] = lost;
  metrics["global_steps_made_up"] = made_up;
  if (lost > 0) {
    Log("the job ends ", lost, " global steps short of its schedule (", step, " of ", expected,
        "): updates rolled back by a restore after the replicas that made them had finished");
  }
  // What the PS saw: gradients dropped as stale, and the staleness of
  // those applied (summed over every slice; buckets as SliceStats says).
  if (auto stats = client_->Stats(); stats.ok()) {
    int64_t dropped = 0;
    std::vector<int64_t> histogram;
    for (const v1::StatsResponse& ps : *stats) {
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
      labels.push_back(b <= 2
                           ? std::to_string(b)
                           : absl::StrCat((int64_t{1} << (b - 2)) + 1, "-", int64_t{1} << (b - 1)));
    }
    metrics["staleness_histogram"] = std::move(h);
    metrics["staleness_buckets"] = std::move(labels);
  }
  const double wall = last_end - first_start;
  metrics["training_seconds"] = wall;
  metrics["examples"] = examples;
  metrics["examples_per_sec"] = wall > 0 ? examples / wall : 0.0;
  // The run's settings beside its results (run.json has the rest).
  metrics["job"] = DescribeJob(options_.job);
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
  // With an evaluator in the cluster, output_dir/eval is its to write.
  if (cfg_.cluster.evaluator.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval,
                             EventWriter::Open(options_.output_dir + "/eval"));
    PSTRAIN_RETURN_IF_ERROR(eval->WriteScalars(step, r.ScoreScalars()));
  }
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(options_.output_dir + "/final_metrics.json", metrics.dump() + "\n"));
  return metrics;
}

void ChiefDuties::WaitForEvaluator(int64_t step) const {
  if (cfg_.cluster.evaluator.empty() || options_.eval_wait <= absl::ZeroDuration()) return;
  if (ReadScoredStep(options_.output_dir) >= step) return;
  Log("waiting up to ", absl::FormatDuration(options_.eval_wait),
      " (--eval_wait_secs) for the evaluator to score the final checkpoint, step ", step);
  const absl::Time start = absl::Now();
  while (ReadScoredStep(options_.output_dir) < step) {
    if (absl::Now() - start >= options_.eval_wait) {
      Log("the evaluator has not scored step ", step, " after ",
          absl::FormatDuration(options_.eval_wait),
          " (--eval_wait_secs); ending without its score");
      return;
    }
    absl::SleepFor(kHeartbeat);
  }
  Log("the evaluator scored the final checkpoint (step ", step, ") after ",
      absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(100))));
}

absl::Status ChiefDuties::MakeUpRolledBack() {
  // Async steps are each replica's own: the chief runs a finished replica's
  // shard from the restored step, as that replica would have. Sync steps are
  // the job's (the replicas still training redo them); ssp replicas wait for
  // each other, which a replica run alone after the rest cannot.
  if (options_.job.consistency != "async") return absl::OkStatus();
  // A restore during a make-up rolls back those made up before it: a few
  // rounds at most.
  for (int round = 0; round < 5; ++round) {
    const int64_t generation = tracker_.generation();
    std::vector<int> stale;
    for (const auto& [replica, report] : tracker_.reports()) {
      if (report.generation() != generation) stale.push_back(replica);
    }
    if (stale.empty()) return absl::OkStatus();
    for (int replica : stale) {
      TfConfig as = cfg_;
      as.task = tracker_.replicas()[replica];
      Log("making up the steps of ", as.task.ToString(),
          ": a restore rolled its updates back after it finished, and it is not training "
          "again; the chief trains its shard from the restored step");
      train::ReplicaOptions r;
      r.job = options_.job;
      r.output_dir = options_.output_dir;
      r.ps_wait = options_.ps_wait;
      r.security = options_.security;
      PSTRAIN_ASSIGN_OR_RETURN(v1::ReportDoneRequest report, train::TrainAsReplica(as, r));
      {
        absl::MutexLock lock(&mu_);
        made_up_ += report.steps();
      }
      PSTRAIN_RETURN_IF_ERROR(tracker_.MarkDone(report));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ChiefDuties::Finish() {
  absl::StatusOr<Json> metrics = FinishJob();
  if (absl::Status s = WriteRunEnd(options_.output_dir, metrics.status(), absl::Now()); !s.ok()) {
    Log("could not record the run's end in ", RunRecordPath(options_.output_dir), ": ",
        s.message());
  }
  return metrics;
}

absl::StatusOr<Json> ChiefDuties::FinishJob() {
  if (finished_.has_value()) {
    StopParameterServers(absl::OkStatus());
    WaitForEvaluator(FindMember(*finished_, "global_step")->get<int64_t>());
    return *finished_;
  }
  // Sync with backup replicas: the steps are done once replicas_to_aggregate
  // replicas finished; a lost backup is not waited for beyond a grace time.
  const model::JobSpec& job = options_.job;
  const int replicas = static_cast<int>(tracker_.replicas().size());
  const bool backups = job.consistency == "sync" && job.replicas_to_aggregate > 0 &&
                       job.replicas_to_aggregate < replicas;
  absl::Status waited =
      tracker_.WaitForAll(options_.job_timeout, backups ? job.replicas_to_aggregate : 0,
                          absl::Seconds(std::min(30, job.sync_wait_secs)));
  StopCheckpointing();
  auto fail = [this](absl::Status why) {
    StopWatching();
    StopParameterServers(why);
    return why;
  };
  if (!waited.ok()) return fail(waited);
  // The final phase: the final checkpoint (what a relaunch of the finished
  // job resumes from), the score, the metrics. The PS watch goes on: a PS
  // lost now is waited for and restored as during training, and the phase
  // starts again, within --ps_wait_s.
  Log("every replica is done; writing the final checkpoint and scoring it");
  absl::Time trouble_since = absl::InfiniteFuture();
  while (true) {
    // Before each try: a restore (in this phase too) rolled back finished
    // replicas' steps.
    if (absl::Status s = MakeUpRolledBack(); !s.ok()) return fail(s);
    absl::StatusOr<Json> scored = ScoreFinal(test_);
    if (scored.ok()) {
      StopWatching();
      StopParameterServers(absl::OkStatus());
      WaitForEvaluator(FindMember(*scored, "global_step")->get<int64_t>());
      return scored;
    }
    if (absl::Status failed = tracker_.failure(); !failed.ok()) return fail(failed);
    const absl::StatusCode code = scored.status().code();
    if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kAborted &&
        code != absl::StatusCode::kFailedPrecondition &&
        code != absl::StatusCode::kDeadlineExceeded) {
      return fail(scored.status());
    }
    const absl::Time now = absl::Now();
    if (trouble_since == absl::InfiniteFuture()) trouble_since = now;
    if (now - trouble_since > options_.ps_wait) {
      return fail(absl::UnavailableError(
          absl::StrCat("the final checkpoint and score failed for ",
                       absl::FormatDuration(absl::Trunc(now - trouble_since, absl::Seconds(1))),
                       " (--ps_wait_s): ", scored.status().message())));
    }
    Log("final phase: ", scored.status().message(),
        "; trying again once the ps are back (the watch restores a ps that lost its variables)");
    absl::SleepFor(kHeartbeat);
  }
}

}  // namespace pstrain::coordinator
