#include "coordinator/chief_duties.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_shard.h"
#include "cluster/checkpoint_layout.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "data/input.h"
#include "job/run_record.h"
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
PsKeeper* signal_target ABSL_GUARDED_BY(signal_mu) = nullptr;

}  // namespace

void ChiefDuties::CheckpointOnStopSignals() {
  {
    absl::MutexLock lock(&signal_mu);
    signal_target = keeper_.get();
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
    if (keeper_ != nullptr && signal_target == keeper_.get()) signal_target = nullptr;
  }
  if (checkpoints_ != nullptr) checkpoints_->Stop();
  if (watch_ != nullptr) watch_->Stop();
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

absl::StatusOr<std::unique_ptr<ChiefDuties>> ChiefDuties::Start(const TfConfig& cfg,
                                                                const ChiefOptions& options) {
  std::unique_ptr<ChiefDuties> chief(new ChiefDuties(cfg, options));
  chief->started_ = absl::Now();
  if (absl::Status prepared = chief->Prepare(); !prepared.ok()) {
    // With the directory held (the lock taken), a failure for good is
    // recorded in run.json: the tasks waiting for this chief find it
    // there and end with the job's code (job/run_record.h, EndedBadly).
    // Else (the directory cannot be written) the chief tells its tasks
    // itself: the PS, and whoever asks it for a while.
    const absl::Status why = AsSetupFailure(prepared);
    if (!chief->held_elsewhere_ && RoleExitCode(why, FailureKind::kBadConfig) < kExitRetryable) {
      bool recorded = false;
      if (chief->dir_lock_ != nullptr) {
        absl::StatusOr<bool> s =
            RecordFailedLaunch(options.output_dir, options.run, why, absl::Now());
        recorded = s.ok() && *s;
        if (!s.ok()) {
          Log("could not record the failed launch in ", RunRecordPath(options.output_dir), ": ",
              s.status().message());
        }
      }
      if (!recorded) chief->TellEveryTask(why, /*stop_ps=*/true);
    }
    return why;
  }
  if (absl::Status began = chief->Begin(); !began.ok()) {
    // A failure for good (a task that reported it cannot take part while
    // the chief waited for the PS, say) ends the job as in Finish: recorded,
    // the PS that answer stopped, the tasks told.
    if (chief->finisher_ != nullptr &&
        RoleExitCode(began, FailureKind::kPermanent) < kExitRetryable) {
      chief->EndWithFailure(began, /*wait_for_ps=*/false);
    }
    return began;
  }
  return chief;
}

absl::Status ChiefDuties::Begin() {
  PSTRAIN_RETURN_IF_ERROR(Serve());
  PSTRAIN_RETURN_IF_ERROR(ConnectParts());
  // A job that finished (its final checkpoint complete, its metrics written)
  // needs no PS: they may have exited already.
  PSTRAIN_ASSIGN_OR_RETURN(finished_,
                           FinishedJob(options_.output_dir, ScheduleKey(), placement_));
  if (finished_.has_value()) {
    tracker_.SetFinished();
    return absl::OkStatus();
  }
  Log("waiting for ", cfg_.cluster.ps.size(), " ps");
  // A task that cannot take part (a PS started under another index) fails
  // the job while the chief waits.
  PSTRAIN_RETURN_IF_ERROR(
      admin_->WaitUntilAnswering(options_.ps_wait, [this] { return tracker_.failure(); }));
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t serving, keeper_->TakeOver());
  tracker_.SetGeneration(serving);
  watch_->Start();
  checkpoints_->Start();
  return absl::OkStatus();
}

absl::Status ChiefDuties::Prepare() {
  PSTRAIN_ASSIGN_OR_RETURN(net_, model::Network::Create(options_.job.model, 1024));
  PSTRAIN_ASSIGN_OR_RETURN(placement_,
                           ComputePlacement(net_->variables(), cfg_.cluster.ps.size()));
  // One job per output directory, before anything there is read.
  absl::StatusOr<std::unique_ptr<DirLock>> lock =
      LockOutputDir(options_.output_dir, cfg_.task.ToString());
  held_elsewhere_ = lock.status().code() == absl::StatusCode::kAlreadyExists;
  PSTRAIN_RETURN_IF_ERROR(lock.status());
  dir_lock_ = *std::move(lock);
  // Before anything in the output directory changes: a run of another
  // model there is refused, its checkpoints left as they are.
  Json model = DescribeModel(net_->variables(), options_.job.optimizer.name);
  PSTRAIN_RETURN_IF_ERROR(AcceptRelaunch(*dir_lock_, options_.output_dir, model));
  PSTRAIN_ASSIGN_OR_RETURN(
      test_, data::LoadInputSplit(options_.job.data_dir, options_.job.input, data::Split::kTest,
                                  options_.job.model.num_classes(), /*pixels_as_bytes=*/true));
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options_.output_dir));
  Json run = options_.run;
  run["job"] = DescribeJob(options_.job);
  run["model"] = model;
  service_.SetJob(Json{{"job", run["job"]}, {"model", std::move(model)}});
  PSTRAIN_RETURN_IF_ERROR(WriteRunStart(options_.output_dir, std::move(run), started_));
  // Replicas that reported done to an earlier run of the chief have exited;
  // their reports are on disk. Read before any new report is taken.
  PSTRAIN_ASSIGN_OR_RETURN(const int done,
                           tracker_.KeepReportsIn(options_.output_dir, options_.rejoin_grace));
  if (done > 0) {
    Log(done, " of ", tracker_.replicas().size(),
        " training replicas reported done before this start (", options_.output_dir,
        "/done); those a restore has not rolled back since are not waited for again");
  }
  return absl::OkStatus();
}

absl::Status ChiefDuties::Serve() {
  PSTRAIN_ASSIGN_OR_RETURN(
      server_, GrpcServer::Create({options_.bind_address, 512 << 20, options_.security}, {&service_}));
  Log("coordinator serving on ", options_.bind_address);
  return absl::OkStatus();
}

absl::Status ChiefDuties::ConnectParts() {
  const model::JobSpec& job = options_.job;
  client::ControlChannelOptions control;
  control.ps_addresses = cfg_.cluster.ps;
  control.security = options_.security;
  admin_ = client::PsAdmin::Connect(control);
  client::PsClientOptions reader;
  reader.ps_addresses = cfg_.cluster.ps;
  reader.replica = -1;  // an observer: the replicas train with their own
  reader.security = options_.security;
  PSTRAIN_ASSIGN_OR_RETURN(reader_, client::PsClient::Create(reader, placement_));
  observer_ = std::make_unique<client::RemoteStore>(reader_.get(), net_->offsets());

  PsKeeperOptions keeper;
  keeper.output_dir = options_.output_dir;
  keeper.placement = placement_;
  keeper.offsets = net_->offsets();
  keeper.create.optimizer = job.optimizer;
  keeper.create.consistency = job.consistency;
  keeper.create.num_replicas = static_cast<int>(tracker_.replicas().size());
  keeper.create.replicas_to_aggregate = job.replicas_to_aggregate;
  keeper.create.seed = job.seed;
  keeper.create.sync_wait = absl::Seconds(job.sync_wait_secs);
  // No values: each PS draws its slices from the job's initial stream
  // (the variables' initializers, cluster/initial_stream.h).
  keeper.keep_checkpoints = job.keep_checkpoints;
  keeper.spare_unscored = !cfg_.cluster.evaluator.empty();
  keeper_ = std::make_unique<PsKeeper>(admin_.get(), std::move(keeper));

  JobFinisherOptions finish;
  finish.job = job;
  finish.output_dir = options_.output_dir;
  finish.ps_wait = options_.ps_wait;
  finish.job_timeout = options_.job_timeout;
  finish.has_evaluator = !cfg_.cluster.evaluator.empty();
  finish.eval_wait = options_.eval_wait;
  finish.schedule = ScheduleKey();
  finish.started = started_;
  finish.train_replica = [this](const TaskId& task) {
    TfConfig as = cfg_;
    as.task = task;
    train::ReplicaOptions r;
    r.job = options_.job;
    r.output_dir = options_.output_dir;
    r.ps_wait = options_.ps_wait;
    r.security = options_.security;
    return train::TrainAsReplica(as, r);
  };
  finish.stop_checkpoints = [this] { checkpoints_->Stop(); };
  finish.quiet_checkpoints = [this] {
    if (checkpoints_ != nullptr) checkpoints_->RequestStop();
  };
  finish.stop_watch = [this] { watch_->Stop(); };
  finish.record_end = [this](const absl::Status& outcome) { RecordEnd(outcome); };
  finisher_ = std::make_unique<JobFinisher>(admin_.get(), keeper_.get(), &tracker_,
                                            observer_.get(), net_.get(), &test_, std::move(finish));

  PsWatchOptions watch;
  watch.ps_wait = options_.ps_wait;
  watch.on_permanent_failure = [this](const absl::Status& why) {
    finisher_->StopParameterServers(why);
  };
  watch_ = std::make_unique<PsWatch>(admin_.get(), keeper_.get(), &tracker_, std::move(watch));

  CheckpointLoopOptions loop;
  loop.every_secs = job.checkpoint_every_secs;
  loop.every_steps = job.checkpoint_every_steps;
  loop.ps_down = [this] { return watch_->ps_down(); };
  checkpoints_ = std::make_unique<CheckpointLoop>(admin_.get(), keeper_.get(), std::move(loop));
  return absl::OkStatus();
}

std::string ChiefDuties::ScheduleKey() const {
  const model::JobSpec& job = options_.job;
  return absl::StrCat("epochs=", job.epochs, " max_steps=", job.max_steps,
                      " batch_size=", job.batch_size, " consistency=", job.consistency.ToString(),
                      " replicas_to_aggregate=", job.replicas_to_aggregate,
                      " replicas=", tracker_.replicas().size(), " ps=", cfg_.cluster.ps.size(),
                      " parameters=", net_->num_parameters(), " seed=", job.seed);
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

absl::StatusOr<Json> ChiefDuties::Finish() {
  absl::StatusOr<Json> metrics =
      finished_.has_value() ? finisher_->FinishedBefore(*finished_) : finisher_->Finish();
  RecordEnd(metrics.status());
  return metrics;
}

absl::StatusOr<Json> ChiefDuties::TrainAndFinish(train::ReplicaOptions* replica) {
  auto train_then_finish = [&]() -> absl::StatusOr<Json> {
    if (replica != nullptr) {
      PSTRAIN_ASSIGN_OR_RETURN(const bool done, JoinLocal(cfg_.task));
      if (done) {
        Log(cfg_.task.ToString(), " finished training before this start; not training again");
      } else {
        replica->job_failure = [this] { return failure(); };
        absl::StatusOr<v1::ReportDoneRequest> report = train::TrainAsReplica(cfg_, *replica);
        // The job failed first (a task refused, say): that is why.
        if (!report.ok()) return failure().ok() ? report.status() : failure();
        PSTRAIN_RETURN_IF_ERROR(ReportLocal(*report));
      }
    }
    return Finish();
  };
  absl::StatusOr<Json> metrics = train_then_finish();
  if (!metrics.ok()) EndWithFailure(metrics.status(), /*wait_for_ps=*/true);
  return metrics;
}

void ChiefDuties::EndWithFailure(const absl::Status& why, bool wait_for_ps) {
  // Retryable failures leave the PS running for the restarted chief.
  finisher_->StopParameterServers(why, wait_for_ps);
  if (end_unrecorded_ && RoleExitCode(why, FailureKind::kPermanent) < kExitRetryable) {
    TellEveryTask(why, /*stop_ps=*/false);  // stopped just now
  }
}

void ChiefDuties::TellEveryTask(const absl::Status& why, bool stop_ps) {
  tracker_.Fail(why);
  const int code = RoleExitCode(why, FailureKind::kPermanent);
  Log("the job failed for good (exit ", code, ") and ", RunRecordPath(options_.output_dir),
      " does not say so: telling its tasks for up to ",
      absl::FormatDuration(options_.tell_wait));
  std::thread ps_told;
  if (stop_ps && !cfg_.cluster.ps.empty()) {
    ps_told = std::thread([this, code] {
      client::ControlChannelOptions control;
      control.ps_addresses = cfg_.cluster.ps;
      control.security = options_.security;
      std::unique_ptr<client::PsAdmin> admin = client::PsAdmin::Connect(control);
      if (absl::Status s = admin->ShutdownAll("job failed", code, options_.tell_wait); !s.ok()) {
        Log("stopping the ps: ", s.message());
      }
    });
  }
  if (server_ == nullptr) {
    if (absl::Status s = Serve(); !s.ok()) Log("cannot tell the tasks that ask: ", s.message());
  }
  if (server_ != nullptr) {
    std::vector<std::string> tasks;
    for (int i = 0; i < static_cast<int>(cfg_.cluster.worker.size()); ++i) {
      if (!(TaskId{Role::kWorker, i} == cfg_.task)) tasks.push_back(absl::StrCat("worker:", i));
    }
    for (int i = 0; i < static_cast<int>(cfg_.cluster.evaluator.size()); ++i) {
      tasks.push_back(absl::StrCat("evaluator:", i));
    }
    if (tracker_.WaitUntilTold(tasks, options_.tell_wait)) {
      Log("every worker and evaluator has been told");
    } else {
      Log("not every worker and evaluator asked within ",
          absl::FormatDuration(options_.tell_wait));
    }
  }
  if (ps_told.joinable()) ps_told.join();
}

void ChiefDuties::RecordEnd(const absl::Status& outcome) {
  if (end_recorded_.exchange(true)) return;
  if (absl::Status s = WriteRunEnd(options_.output_dir, outcome, absl::Now()); !s.ok()) {
    end_unrecorded_ = true;
    Log("could not record the run's end in ", RunRecordPath(options_.output_dir), ": ",
        s.message());
  }
}

}  // namespace pstrain::coordinator
