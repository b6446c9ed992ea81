#include "train/local_trainer.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/create_request.h"
#include "client/in_process_store.h"
#include "cluster/checkpoint_layout.h"
#include "base/crc32c.h"
#include "base/event_file.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "data/input.h"
#include "job/job_description.h"
#include "job/run_record.h"
#include "model/backend.h"
#include "model/embeddings.h"
#include "model/network.h"
#include "store/ps_control.h"
#include "train/group_outcome.h"
#include "train/local_checkpoint.h"
#include "train/trainer.h"

namespace pstrain::train {

namespace {

// A local run: the job's model on one PS held in this process
// (client/in_process_store.h), trained by the cluster's step loop
// (train/trainer.h) with every step applied before the next (exact), as
// one process applying each step in turn does. Its checkpoints are the
// PS's shard (train/local_checkpoint.h).
class LocalRun final : public StepObserver {
 public:
  LocalRun(const model::JobSpec& job, const LocalOptions& options)
      : job_(job),
        options_(options),
        group_(options.group),
        chief_(group_ == nullptr || group_->replica == 0),
        dir_(options.output_dir),
        writes_(!dir_.empty() && chief_) {}

  // RunLocal; `*recorded` is set once run.json holds this run's start (so
  // that a failure after it is recorded as the run's end).
  absl::StatusOr<LocalResult> Run(bool* recorded) {
    started_ = absl::Now();
    // A replica group takes its launch steps together: each step's outcome
    // on every replica is shared (train/group_outcome.h), so that one
    // replica's failure for good ends them all with its code.
    absl::Status loaded = Load();
    if (group_ != nullptr) loaded = AgreeOnTheSchedule(loaded);
    if (!loaded.ok()) return FailedStart(loaded);
    total_ = job_.max_steps > 0 ? job_.max_steps : job_.epochs * per_epoch_;
    absl::Status resumed = CreateStore();
    if (resumed.ok()) resumed = Resume(recorded);
    if (group_ != nullptr) resumed = AgreeOnTheStart(resumed);
    // Once this launch was accepted in the directory, a failure is the
    // run's: its end, or (before run.json held the start) the launch's.
    // A refused relaunch changes nothing there.
    if (!resumed.ok()) return accepted_ && !*recorded ? FailedStart(resumed) : resumed;
    PSTRAIN_RETURN_IF_ERROR(Started());
    absl::StatusOr<TrainerResult> trained = Train();
    if (!trained.ok()) return EndTogether(trained.status());
    PSTRAIN_RETURN_IF_ERROR(TakeResult(*trained));
    if (result_.stopped_by != 0) {
      PSTRAIN_RETURN_IF_ERROR(Stopped());
    } else {
      PSTRAIN_RETURN_IF_ERROR(Finish());
    }
    return std::move(result_);
  }

  // StepObserver: a signal stops the run before its next step; a replica
  // group stops together, before the step after the one that carried the
  // vote.
  int StopBefore(int64_t step) override {
    const int mine = options_.stop == nullptr ? 0 : options_.stop->load(std::memory_order_relaxed);
    if (group_ != nullptr && group_->stop_vote) return group_->stop_vote(mine);
    return mine;
  }

  // StepObserver: each full epoch's test score (as Keras's
  // validation_data), and the checkpoints the job asks for.
  absl::Status AfterStep(int64_t step, int64_t total) override {
    if (chief_ && job_.max_steps == 0 && step % per_epoch_ == 0 && step < total) {
      PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult e, Score());
      ReportEpoch(step / per_epoch_, e);
    }
    if (writes_ && step < total &&
        ((job_.checkpoint_every_secs > 0 &&
          absl::Now() - last_checkpoint_ >= absl::Seconds(job_.checkpoint_every_secs)) ||
         (job_.checkpoint_every_steps > 0 && step >= checkpointed_ + job_.checkpoint_every_steps))) {
      Checkpoint(step, false).IgnoreError();  // logged; the run goes on
    }
    return absl::OkStatus();
  }

 private:
  // The training and test splits, and the backend.
  absl::Status Load() {
    const absl::Time load_start = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(
        train_data_, data::OpenTrainingInput(job_.data_dir, job_.input, replica_index(),
                                             num_replicas(), job_.batch_size, job_.seed,
                                             job_.model.num_classes()));
    if (train_data_.skipped_records > 0) {
      Log("skipped ", train_data_.skipped_records, " bad training records (skip_bad_records)");
    }
    if (chief_) {
      PSTRAIN_ASSIGN_OR_RETURN(test_,
                               data::LoadInputSplit(job_.data_dir, job_.input, data::Split::kTest,
                                                    job_.model.num_classes(),
                                                    /*pixels_as_bytes=*/true));
    }
    result_.load_seconds = absl::ToDoubleSeconds(absl::Now() - load_start);
    // Batches of up to 1024 for scoring the test split.
    PSTRAIN_ASSIGN_OR_RETURN(backend_, model::CreateBackend(
                                           job_.model, std::max(job_.batch_size, 1024), job_.device));
    Log("computing on ", backend_->Describe());
    result_.backend = backend_->name();
    data::BatchSource& train = *train_data_.source;
    if (train.example_dim() != job_.model.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrFormat("data examples have %d features but the model's input_dim is %d",
                          train.example_dim(), job_.model.input_dim));
    }
    if (train.batches_per_epoch() == 0) {
      return absl::InvalidArgumentError("the training set is smaller than one batch");
    }
    per_epoch_ = train.batches_per_epoch();
    return absl::OkStatus();
  }

  int replica_index() const { return group_ == nullptr ? 0 : group_->replica; }

  // A step the replica group takes together (train/group_outcome.h): this
  // replica's outcome, `value` when `mine` is OK, against every replica's.
  absl::StatusOr<std::vector<std::string>> Share(const absl::Status& mine, std::string value,
                                                 FailureKind unmarked, bool at_end = false) const {
    return GatherOutcomes(at_end && group_->end_gather ? group_->end_gather : group_->all_gather,
                          group_->names,
                          mine.ok() ? absl::StatusOr<std::string>(std::move(value))
                                    : absl::StatusOr<std::string>(mine),
                          unmarked);
  }
  int num_replicas() const { return group_ == nullptr ? 1 : group_->num_replicas; }

  // Whether every replica read its data (`loaded`: this one's outcome);
  // the replicas' shards may differ by a batch: an epoch is the fewest
  // batches of any, so that every replica takes every step.
  absl::Status AgreeOnTheSchedule(const absl::Status& loaded) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> all,
                             Share(loaded, absl::StrCat(per_epoch_), FailureKind::kBadConfig));
    int64_t fewest = per_epoch_;
    for (size_t r = 0; r < all.size(); ++r) {
      int64_t theirs = 0;
      if (!absl::SimpleAtoi(all[r], &theirs)) {
        return absl::InternalError(absl::StrCat(group_->names[r], " sent \"", all[r],
                                                "\" for its batches per epoch"));
      }
      fewest = std::min(fewest, theirs);
    }
    per_epoch_ = fewest;
    return absl::OkStatus();
  }

  // Whether every replica took over the run on disk (`resumed`: this
  // one's outcome), and from the same checkpoint: else none trains.
  absl::Status AgreeOnTheStart(const absl::Status& resumed) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> all,
                             Share(resumed, absl::StrCat(first_), FailureKind::kBadConfig));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r] != absl::StrCat(first_)) {
        return absl::FailedPreconditionError(absl::StrCat(
            group_->names[r], " resumes from step ", all[r], " but ",
            group_->names[replica_index()], " from step ", first_,
            ": every task must see the same output directory (--output_dir) and its checkpoints"));
      }
    }
    return absl::OkStatus();
  }

  // After the last step: every replica holds the same bits (values, slots
  // and rows), or the run fails naming the first that differs.
  absl::Status CheckReplicasAgree() {
    PSTRAIN_ASSIGN_OR_RETURN(ckpt::ShardContents shard, store_->Snapshot(result_.steps));
    uint32_t crc = 0;
    for (const v1::TensorCheckpoint& t : shard.tensors) {
      crc = Crc32c(t.data().data(), t.data().size(), crc);
      crc = Crc32c(t.row_ids().data(), t.row_ids().size() * sizeof(int64_t), crc);
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> all, group_->all_gather(absl::StrCat(crc)));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r] != all[0]) {
        return absl::InternalError(absl::StrCat(
            "the replicas' models differ after step ", result_.steps, ": ", group_->names[r],
            " holds checksum ", all[r], ", ", group_->names[0], " ", all[0]));
      }
    }
    Log("every replica holds the same model after step ", result_.steps, " (checksum ", all[0],
        ")");
    return absl::OkStatus();
  }

  // The one PS, its variables created with the model's initial values (as
  // a chief creates them), and the stores that reach it: the replica's and
  // an observer's (replica -1) for scoring.
  absl::Status CreateStore() {
    const model::Network& net = backend_->network();
    PSTRAIN_ASSIGN_OR_RETURN(placement_, ComputePlacement(net.variables(), 1));
    // Every tensor async: one replica's steps, each applied on arrival.
    for (VariableDef& v : placement_.variables) v.consistency.reset();
    for (VariableDef& v : placement_.embeddings) v.consistency.reset();
    client::CreateOptions create;
    create.optimizer = job_.optimizer;
    create.consistency = Consistency::Async();
    create.seed = job_.seed;
    store_ = std::make_shared<ps::ShardStore>(0, 1);
    ps::PsControl control(store_.get());
    PSTRAIN_RETURN_IF_ERROR(
        control
            .CreateVariables(client::CreateRequestFor(placement_, 0, {}, net.offsets(), create))
            .status());
    client::InProcessOptions replica;
    PSTRAIN_ASSIGN_OR_RETURN(replica_,
                             client::InProcessStore::Create({store_}, placement_, net.offsets(),
                                                            replica));
    client::InProcessOptions observer;
    observer.replica = -1;
    PSTRAIN_ASSIGN_OR_RETURN(observer_,
                             client::InProcessStore::Create({store_}, placement_, net.offsets(),
                                                            observer));
    training_ = replica_.get();
    if (group_ != nullptr) {
      wrapped_ = group_->wrap(std::move(replica_), placement_, net.offsets());
      training_ = wrapped_.get();
    }
    params_.resize(net.num_parameters());
    return absl::OkStatus();
  }

  // Before anything in the output directory changes: a run of another
  // model there is refused, its checkpoints left as they are; then the
  // newest checkpoint is restored and the run's start recorded.
  absl::Status Resume(bool* recorded) {
    if (writes_) {
      // One job per output directory, before anything there is read.
      PSTRAIN_ASSIGN_OR_RETURN(
          dir_lock_, LockOutputDir(dir_, group_ == nullptr ? "train --local" : "chief"));
      const model::Network& net = backend_->network();
      const Json model_json = DescribeModel(net.variables(), job_.optimizer.name);
      PSTRAIN_RETURN_IF_ERROR(AcceptRelaunch(*dir_lock_, dir_, model_json));
      accepted_ = true;
      PSTRAIN_ASSIGN_OR_RETURN(first_, RestoreLocalCheckpoint(dir_, store_.get()));
      PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir_));
      Json run = RunRecord();
      run["model"] = model_json;
      PSTRAIN_RETURN_IF_ERROR(WriteRunStart(dir_, std::move(run), started_));
      *recorded = true;
    } else if (!dir_.empty()) {
      // A replica but the chief: the chief's checkpoints, read only.
      PSTRAIN_ASSIGN_OR_RETURN(first_, RestoreLocalCheckpoint(dir_, store_.get()));
    }
    return absl::OkStatus();
  }

  // What run.json records of this launch, less the model: the command
  // line (LocalOptions::run), the job and, for a replica group, the mode;
  // the cluster as TF_CONFIG gave it, which the job's other tasks compare
  // (job/run_record.h, EndedBadly): {} for one process.
  Json RunRecord() const {
    Json run = options_.run;
    run["job"] = DescribeJob(job_);
    if (group_ == nullptr || FindMember(run, "cluster") == nullptr) run["cluster"] = Json::object();
    if (group_ != nullptr) run["mode"] = group_->mode;
    return run;
  }

  // A replica group's launch that failed before run.json held its start
  // (a replica's data, or replica 0's restore): replica 0 records the
  // failure there as the PS mode's chief does (RecordFailedLaunch), taking
  // the directory first, so that the job's evaluator ends with its code and
  // a relaunch is not refused for it. A retryable failure is not recorded
  // (a restart may succeed), nor one in a directory another job holds or
  // on a run.json of another job.
  absl::Status FailedStart(const absl::Status& why) {
    if (group_ == nullptr || !writes_ ||
        RoleExitCode(why, FailureKind::kBadConfig) >= kExitRetryable) {
      return why;
    }
    if (dir_lock_ == nullptr) {
      absl::StatusOr<std::unique_ptr<DirLock>> lock = LockOutputDir(dir_, "chief");
      if (!lock.ok()) {
        Log("could not record the failed launch in ", RunRecordPath(dir_), ": ",
            lock.status().message());
        return why;
      }
      dir_lock_ = *std::move(lock);
    }
    absl::StatusOr<bool> recorded = RecordFailedLaunch(dir_, RunRecord(), why, absl::Now());
    if (!recorded.ok()) {
      Log("could not record the failed launch in ", RunRecordPath(dir_), ": ",
          recorded.status().message());
    }
    return why;
  }

  // The step loop's failure, `why`, in a replica group: a failure another
  // replica announced becomes that replica's (its name, its code); one of
  // this replica's own that is for good is announced once its exchanges
  // under way have ended, so that every replica ends with its code rather
  // than seeing a lost neighbour (a retryable end, which an orchestrator
  // restarts for ever). A retryable one (a neighbour lost) stays as it is.
  absl::Status EndTogether(const absl::Status& why) {
    if (group_ == nullptr) return why;
    if (group_->told) {
      if (std::optional<std::pair<int, std::string>> told = group_->told()) {
        return DecodeFailure(group_->names.at(told->first), told->second);
      }
    }
    if (!group_->announce || RoleExitCode(why, FailureKind::kPermanent) >= kExitRetryable) {
      return why;
    }
    training_->Drain().IgnoreError();  // the exchanges under way end with the others'
    if (absl::Status s = group_->announce(EncodeFailure(why, FailureKind::kPermanent)); !s.ok()) {
      Log("could not tell every replica of this failure: ", s.message());
    } else {
      Log("every replica was told of this failure");
    }
    return WithRoleKind(why, FailureKind::kPermanent);
  }

  // Once every replica took over: the step loop's stores ready, and where
  // the run starts.
  absl::Status Started() {
    checkpointed_ = first_;
    result_.resumed_step = first_;
    PSTRAIN_RETURN_IF_ERROR(training_->WaitUntilReady(absl::ZeroDuration()));
    PSTRAIN_RETURN_IF_ERROR(observer_->WaitUntilReady(absl::ZeroDuration()));
    if (first_ > 0) {
      Log("resuming from the checkpoint at step ", first_, " in ", dir_, ": its input at batch ",
          first_ % per_epoch_, " of ", per_epoch_, " in epoch ", first_ / per_epoch_);
    }
    if (first_ >= total_) {
      Log("the run had reached step ", first_, " of ", total_, " already; scoring it");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<TrainerResult> Train() {
    TrainerOptions trainer;
    trainer.job = job_;
    // Every tensor async (CreateStore); one exchange per step, or, with
    // replicas averaging over a ring in packs, each layer's exchange
    // started as soon as backprop has produced its gradient.
    trainer.job.consistency = Consistency::Async();
    trainer.job.push_per_layer = group_ != nullptr && group_->bytes_per_pack > 0;
    trainer.log_every_steps = std::max(options_.log_every_steps, 1);
    trainer.recovery_wait = absl::ZeroDuration();
    trainer.exact = true;
    trainer.backend = backend_.get();
    trainer.observer = this;
    trainer.start_at = std::min(first_, total_);
    if (writes_) trainer.summary_dir = dir_ + "/train";
    const data::BatchSource& train = *train_data_.source;
    if (group_ != nullptr) {
      // Every replica takes the agreed steps, whatever its shard's size.
      trainer.job.max_steps = total_;
      trainer.replica = group_->replica;
      trainer.num_replicas = group_->num_replicas;
      trainer.replica_names = group_->names;
      ApplyStraggler(group_->names[group_->replica], &trainer);
    }
    Log(group_ == nullptr ? "training locally: "
                          : absl::StrCat("training by all-reduce with ", num_replicas(),
                                         " replicas: "),
        total_, " steps of batch ", job_.batch_size, " over ", train.shard_size(), " examples",
        train_data_.streamed ? " (streamed)" : "",
        first_ > 0 ? absl::StrCat(", from step ", std::min(first_, total_)) : std::string());
    last_checkpoint_ = absl::Now();
    return RunTrainer(trainer, train_data_.source.get(), training_);
  }

  absl::Status TakeResult(const TrainerResult& trained) {
    const int64_t trained_steps = trained.steps;
    result_.steps = std::min(first_, total_) + trained_steps;
    result_.stopped_by = trained.stopped_by;
    result_.train_seconds = trained.train_seconds;
    result_.input_wait_seconds = trained.input_wait_seconds;
    // Every replica's examples: the job's rate.
    examples_ = trained_steps * job_.batch_size * num_replicas();
    result_.examples_per_sec = examples_ / std::max(result_.train_seconds, 1e-9);
    PSTRAIN_RETURN_IF_ERROR(observer_->PullAll(params_.data()).status());
    return absl::OkStatus();
  }

  // Stopped: the step reached is kept, and the run ends there.
  absl::Status Stopped() {
    const int64_t step = result_.steps;
    Log("stopped by signal ", result_.stopped_by, " at step ", step, " of ", total_);
    absl::Status saved =
        writes_ && step > checkpointed_ ? Checkpoint(step, false) : absl::OkStatus();
    if (writes_) {
      const absl::Status outcome = absl::CancelledError(absl::StrCat(
          "stopped by signal ", result_.stopped_by, " at step ", step,
          saved.ok() ? absl::StrCat(", checkpointed at step ", checkpointed_)
                     : absl::StrCat("; its checkpoint failed: ", saved.message())));
      if (absl::Status s = WriteRunEnd(dir_, outcome, absl::Now()); !s.ok()) {
        Log("could not record the run's end in ", RunRecordPath(dir_), ": ", s.message());
      }
    }
    PSTRAIN_RETURN_IF_ERROR(saved);
    return TakeTables();
  }

  // The final checkpoint, the test score and final_metrics.json. A replica
  // group ends together: every replica waits until replica 0 has written
  // them (run.json's end included), so that none exits 0 while the job's
  // end is not on disk (a replica 0 lost meanwhile fails the others
  // retryably, and the relaunch resumes from the last checkpoint), and a
  // failure to write them is every replica's.
  absl::Status Finish() {
    if (group_ != nullptr) PSTRAIN_RETURN_IF_ERROR(CheckReplicasAgree());
    absl::Status ended = chief_ ? WriteTheEnd() : absl::OkStatus();
    if (group_ != nullptr) {
      const absl::Status agreed =
          Share(ended, "ended", FailureKind::kPermanent, /*at_end=*/true).status();
      if (chief_ && ended.ok() && !agreed.ok()) {
        // The job's end is on disk: a replica lost after it undoes
        // nothing (restarted, it finds the end in run.json).
        Log("the job's end is recorded; ending although ", agreed.message());
      } else if (ended.ok()) {
        ended = agreed;
      }
    }
    PSTRAIN_RETURN_IF_ERROR(ended);
    return TakeTables();
  }

  absl::Status WriteTheEnd() {
    const int64_t step = result_.steps;
    if (writes_ && step > checkpointed_) {
      PSTRAIN_RETURN_IF_ERROR(Checkpoint(step, /*final=*/true));
    }
    PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult r, Score());
    result_.test_accuracy = r.accuracy();
    if (job_.max_steps == 0) ReportEpoch(job_.epochs, r);
    result_.test_loss = r.mean_loss();
    if (r.has_auc()) result_.test_auc = r.Auc();
    if (writes_) PSTRAIN_RETURN_IF_ERROR(WriteMetrics(r, step));
    return absl::OkStatus();
  }

  absl::Status WriteMetrics(const model::BatchResult& r, int64_t step) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> eval, EventWriter::Open(dir_ + "/eval"));
    PSTRAIN_RETURN_IF_ERROR(eval->WriteScalars(step, r.ScoreScalars()));
    // As a cluster's chief writes it (the keys it shares with one mean the same).
    Json metrics = DescribeScore(r, step);
    metrics["resumed_from_step"] = first_;
    metrics["examples"] = examples_;
    metrics["training_seconds"] = result_.train_seconds;
    metrics["examples_per_sec"] = result_.examples_per_sec;
    metrics["load_seconds"] = result_.load_seconds;
    metrics["input_wait_seconds"] = result_.input_wait_seconds;
    metrics["epoch_test_accuracy"] = result_.epoch_test_accuracy;
    metrics["seconds"] = absl::ToDoubleSeconds(absl::Now() - started_);
    metrics["job"] = DescribeJob(job_);
    metrics["local"] = group_ == nullptr;
    metrics["mode"] = group_ == nullptr ? "local" : group_->mode;
    metrics["num_replicas"] = num_replicas();
    PSTRAIN_RETURN_IF_ERROR(
        WriteFileAtomically(dir_ + "/final_metrics.json", metrics.dump() + "\n"));
    if (absl::Status s = WriteRunEnd(dir_, absl::OkStatus(), absl::Now()); !s.ok()) {
      Log("could not record the run's end in ", RunRecordPath(dir_), ": ", s.message());
    }
    return absl::OkStatus();
  }

  // The trained values into the result: the dense ones pulled (TakeResult),
  // the tables' rows as the PS holds them.
  absl::Status TakeTables() {
    result_.params = params_;
    const model::Network& net = backend_->network();
    PSTRAIN_ASSIGN_OR_RETURN(LocalTables tables,
                             LocalTables::Create(net.variables(), job_.seed, &job_.optimizer));
    PSTRAIN_ASSIGN_OR_RETURN(ckpt::ShardContents shard, store_->Snapshot(result_.steps));
    for (const v1::TensorCheckpoint& t : shard.tensors) {
      if (!t.embedding()) continue;
      for (int i = 0; i < tables.size(); ++i) {
        if (tables[i].name() != t.key()) continue;
        const auto* floats = reinterpret_cast<const float*>(t.data().data());
        PSTRAIN_RETURN_IF_ERROR(tables[i].Restore(
            t.row_ids(), absl::MakeConstSpan(floats, t.data().size() / sizeof(float)),
            t.row_updates()));
      }
    }
    result_.tables = std::move(tables);
    return absl::OkStatus();
  }

  // The test split scored with the parameters the store holds now.
  absl::StatusOr<model::BatchResult> Score() {
    PSTRAIN_RETURN_IF_ERROR(observer_->PullAll(params_.data()).status());
    const model::Network& net = backend_->network();
    auto read_rows = [this](const std::string& table, absl::Span<const int64_t> ids, float* out) {
      const client::TableRows rows[] = {{table, ids, out, nullptr}};
      return observer_->PullRows(rows);
    };
    return model::EvaluateExamples(net.embeddings(), read_rows, test_, 1024,
                                   [&](const float* in, const int32_t* labels, int n) {
                                     return backend_->Evaluate(params_.data(), in, labels, n);
                                   });
  }

  // Logs an epoch's test score and keeps its accuracy.
  void ReportEpoch(int64_t epoch, const model::BatchResult& e) {
    const double accuracy = e.accuracy();
    result_.epoch_test_accuracy.push_back(accuracy);
    Log(absl::StrFormat("epoch %d/%d: test accuracy %.4f%s - test loss %.4f", epoch, job_.epochs,
                        accuracy, e.has_auc() ? absl::StrFormat(" - test auc %.4f", e.Auc()) : "",
                        e.mean_loss()));
  }

  // Saves the step reached; a failure is reported (and tried again later).
  absl::Status Checkpoint(int64_t step, bool final) {
    const absl::Time save_start = absl::Now();
    absl::Status s = SaveLocalCheckpoint(dir_, step, *store_, job_.keep_checkpoints, final);
    last_checkpoint_ = absl::Now();
    if (!s.ok()) {
      Log("checkpoint at step ", step, " failed: ", s.message());
      return s;
    }
    checkpointed_ = step;
    Log("checkpoint at step ", step, " written to ", CheckpointDir(dir_, step), " in ",
        absl::FormatDuration(absl::Now() - save_start));
    return absl::OkStatus();
  }

  const model::JobSpec& job_;
  const LocalOptions& options_;
  const ReplicaGroup* const group_;
  const bool chief_;  // writes the run's files and scores the test split
  const std::string dir_;
  const bool writes_;
  absl::Time started_;
  std::unique_ptr<DirLock> dir_lock_;  // Resume on: output_dir is this run's
  bool accepted_ = false;              // Resume: the relaunch was accepted

  // Load.
  data::TrainingInput train_data_;
  data::Dataset test_;
  std::unique_ptr<model::Backend> backend_;
  int64_t per_epoch_ = 0;
  int64_t total_ = 0;

  // CreateStore.
  Placement placement_;
  std::shared_ptr<ps::ShardStore> store_;
  std::unique_ptr<client::InProcessStore> replica_;
  std::unique_ptr<client::InProcessStore> observer_;
  std::unique_ptr<client::ParameterStore> wrapped_;  // the group's store
  client::ParameterStore* training_ = nullptr;       // what the step loop trains on
  std::vector<float> params_;  // the observer's pulls

  // Resume, and the run's progress.
  int64_t first_ = 0;  // the step the run started from
  int64_t checkpointed_ = 0;
  absl::Time last_checkpoint_;
  int64_t examples_ = 0;
  LocalResult result_;
};

}  // namespace

absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, const LocalOptions& options) {
  bool recorded = false;
  LocalRun run(job, options);
  absl::StatusOr<LocalResult> result = run.Run(&recorded);
  if (!result.ok() && recorded) {
    if (absl::Status s = WriteRunEnd(options.output_dir, result.status(), absl::Now()); !s.ok()) {
      Log("could not record the run's end in ", RunRecordPath(options.output_dir), ": ",
          s.message());
    }
  }
  return result;
}

absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, int log_every_steps) {
  LocalOptions options;
  options.log_every_steps = log_every_steps;
  return RunLocal(job, options);
}

}  // namespace pstrain::train
