#include "train/trainer.h"

#include <array>
#include <cstdio>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/event_file.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "data/prefetcher.h"
#include "model/backend.h"
#include "model/embeddings.h"
#include "model/network.h"
#include "train/progress.h"

namespace pstrain::train {
namespace {

// Runs push-then-pull rounds one after another, in the order queued, on
// its own thread, so the trainer can compute while they are in flight.
class RoundTrips {
 public:
  RoundTrips() : thread_([this] { Loop(); }) {}
  ~RoundTrips() {
    {
      absl::MutexLock lock(&mu_);
      quit_ = true;
    }
    thread_.join();
  }

  // Queues a round; returns its ticket (1, 2, ...).
  int64_t Enqueue(std::function<absl::StatusOr<int64_t>()> round) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(round));
    return ++queued_;
  }

  // Waits until the rounds up to `ticket` have run. The first error of any
  // round so far, else the largest global step the rounds returned.
  absl::StatusOr<int64_t> WaitFor(int64_t ticket) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto done = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return finished_ >= ticket || !error_.ok();
    };
    mu_.Await(absl::Condition(&done));
    if (!error_.ok()) return error_;
    return max_step_;
  }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    while (true) {
      std::function<absl::StatusOr<int64_t>()> round;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return quit_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        round = std::move(queue_.front());
        queue_.pop_front();
      }
      // After an error the remaining rounds are skipped, not run.
      absl::StatusOr<int64_t> r = error_ok() ? round() : absl::StatusOr<int64_t>(int64_t{0});
      absl::MutexLock lock(&mu_);
      if (!r.ok() && error_.ok()) error_ = r.status();
      if (r.ok()) max_step_ = std::max(max_step_, *r);
      ++finished_;
    }
  }
  bool error_ok() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return error_.ok();
  }

  absl::Mutex mu_;
  std::deque<std::function<absl::StatusOr<int64_t>()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// One batch on its way through the embeddings: its examples, their ids,
// and each table's lookups, rows and row gradients.
struct EmbeddedBatch {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> ids;  // when an embedding reads the input's id features
  model::EmbeddingBatch lookups;
  int64_t pulled_by = 0;  // the ticket of the round pulling its rows
};

// Trains from the step the PS hold until the schedule ends; adds the steps
// it runs (and their loss) to `result` as it goes, so that they count when
// a lost PS ends it early. One object per attempt (RunTrainer makes a new
// one after a recovery). Run() is the sequence of named steps:
//   Plan        the schedule: how many steps, whether rounds overlap compute
//   Start       pull the parameters; after a restore, skip to its step
//   per step:   AwaitParameters, TakeBatch, Compute (pushing each layer as
//               backprop finishes it), PushRows, PushModel, FinishStep,
//               Report
//   Drain       wait for every round still in flight
class StepLoop {
 public:
  // `continue_at` >= 0: start at that step of the schedule rather than at
  // the one the PS were restored to.
  StepLoop(const TrainerOptions& options, data::BatchSource* source, client::PsClient* client,
           model::Backend* backend, EventWriter* summaries, TrainerResult* result,
           int64_t continue_at)
      : options_(options),
        continue_at_(continue_at),
        job_(options.job),
        client_(client),
        backend_(backend),
        mlp_(&backend->network()),
        embeddings_(mlp_->embeddings()),
        summaries_(summaries),
        result_(*result),
        source_(*source),
        stall_rng_(job_.seed * 7919 + options.replica),
        ids_dim_(source->ids_dim()) {}

  absl::Status Run() {
    PSTRAIN_RETURN_IF_ERROR(Plan());
    PSTRAIN_RETURN_IF_ERROR(Start());
    while (!Done()) {
      PSTRAIN_RETURN_IF_ERROR(RunStep());
    }
    return Drain();
  }

 private:
  // A step's batch: its examples and, with embeddings, its place in the
  // pipeline.
  struct Batch {
    const float* x = nullptr;
    const int32_t* y = nullptr;
    EmbeddedBatch* embedded = nullptr;
  };

  absl::Status Plan() {
    const int64_t split_examples = options_.split_examples > 0
                                       ? options_.split_examples
                                       : source_.shard_size() * options_.num_replicas;
    if (source_.batch_size() != job_.batch_size || source_.batches_per_epoch() == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("replica %d's shard has %d examples, fewer than one batch of %d",
                          options_.replica, source_.shard_size(), job_.batch_size));
    }
    // Async replicas each run their own shard's schedule. Ssp replicas wait
    // for each other, so all run the same number of steps: that of the
    // smallest shard (shards differ by at most one example). Sync jobs count
    // aggregated steps, each of replicas_to_aggregate batches; every replica
    // (backups included) keeps pushing until the PS reach that global step.
    sync_ = job_.consistency == "sync";
    const int aggregate =
        job_.replicas_to_aggregate > 0 ? job_.replicas_to_aggregate : options_.num_replicas;
    const int64_t batches = job_.consistency == "async" ? source_.batches_per_epoch()
                            : sync_ ? split_examples / aggregate / job_.batch_size
                                    : split_examples / options_.num_replicas / job_.batch_size;
    total_steps_ = job_.max_steps > 0 ? job_.max_steps : job_.epochs * batches;
    result_.schedule_steps = total_steps_;
    // A bound on local steps that a sync replica cannot reach unless the PS
    // stop advancing, which the PS's own wait timeout reports first.
    max_local_ = sync_ ? total_steps_ * options_.num_replicas + 1 : total_steps_;
    // Two sets of parameters and gradients when rounds overlap compute: one
    // in use by the model, one in flight. Where the mode allows (async,
    // ssp), step s+1 is computed while step s's round trips are in flight,
    // on the parameters step s-1's round trips brought back.
    overlap_ = options_.overlap_communication && !sync_;
    for (int b = 0; b < (overlap_ ? 2 : 1); ++b) {
      params_[b].resize(mlp_->num_parameters());
      grads_[b].resize(mlp_->num_parameters());
    }
    x_.resize(static_cast<size_t>(job_.batch_size) * source_.example_dim());
    y_.resize(job_.batch_size);
    // With embeddings, batches go through a pipeline of four: while step
    // s computes, the rows of step s+1's ids are being pulled and step
    // s-1's row gradients pushed (async tables: step s+1's rows may miss
    // step s's update, as overlapped dense rounds do; sync tables pull step
    // s+1's rows behind step s's pushes instead); after it, step s+2's
    // batch is gathered and its bags made while that round is still in
    // flight, so the next step queues its round without that work in
    // between. The embeddings' output (the first layer's input) and its
    // gradient are the step's own.
    sync_tables_ = sync_ && !embeddings_.empty() && mlp_->spec().sync_tables;
    if (!embeddings_.empty()) {
      for (EmbeddedBatch& eb : pipeline_) {
        eb.x.resize(x_.size());
        eb.y.resize(y_.size());
        if (embeddings_.reads_ids()) {
          eb.ids.resize(static_cast<size_t>(job_.batch_size) * ids_dim_);
        }
      }
      emb_out_.resize(static_cast<size_t>(job_.batch_size) * embeddings_.output_width());
      emb_grad_.resize(emb_out_.size());
    }
    return absl::OkStatus();
  }

  absl::Status Start() {
    if (sync_) client_->set_stop_step(total_steps_);
    PSTRAIN_ASSIGN_OR_RETURN(global_step_, client_->PullAll(params_[0].data(), offsets()));
    // A job restored from a checkpoint carries on from the checkpoint's
    // step: this replica's steps so far (async steps count every replica's
    // pushes; sync and ssp steps are each replica's), and its place in the
    // data.
    if (continue_at_ >= 0) {
      step_ = std::min(total_steps_, continue_at_);
      Log("carrying on at this replica's step ", step_);
    } else if (const int64_t restored = client_->restored_step(); restored > 0) {
      std::string how;
      step_ = std::min(total_steps_, OwnStep(restored, &how));
      const int64_t per_epoch = std::max<int64_t>(1, source_.batches_per_epoch());
      Log("resuming from the checkpoint at global step ", restored, ": this replica's step ", step_,
          how, ", its input at batch ", step_ % per_epoch, " of ", per_epoch, " in epoch ",
          step_ / per_epoch);
    } else if (options_.rejoined && global_step_ > 0) {
      std::string how;
      step_ = std::min(total_steps_, OwnStep(global_step_, &how));
      const int64_t per_epoch = std::max<int64_t>(1, source_.batches_per_epoch());
      Log("restarted while the job went on (global step ", global_step_,
          "): carrying on at this replica's step ", step_, how, ", its input at batch ",
          step_ % per_epoch, " of ", per_epoch, " in epoch ", step_ / per_epoch);
    }
    // The source may be where an earlier attempt's prefetcher left it.
    PSTRAIN_RETURN_IF_ERROR(source_.Seek(step_));
    // Batches are gathered on a background thread, a few steps ahead.
    prefetch_.emplace(&source_, 4, embeddings_.reads_ids());
    Log("training replica ", options_.replica, " of ", options_.num_replicas, ": ", total_steps_,
        " steps of batch ", job_.batch_size, " (", source_.shard_size(),
        " examples in this shard)");
    start_ = window_start_ = absl::Now();
    if (overlap_) params_[1] = params_[0];
    if (!embeddings_.empty()) PSTRAIN_RETURN_IF_ERROR(QueueRows(step_ + 1));
    return absl::OkStatus();
  }

  // Where this replica is in its own schedule when the job is at `global`:
  // sync steps are the job's; async and ssp steps its own, the pushes the PS
  // applied from it (kept in checkpoints), else (a checkpoint without the
  // counts) async's share of the global step. `how` says which.
  int64_t OwnStep(int64_t global, std::string* how) {
    if (job_.consistency == "sync") return global;
    absl::StatusOr<int64_t> own = client_->ReplicaPushes(options_.replica);
    if (own.ok()) {
      *how = " (its pushes the ps applied)";
      return *own;
    }
    *how = absl::StrCat(" (from the global step: ", own.status().message(), ")");
    return job_.consistency == "async" ? global / std::max(options_.num_replicas, 1) : global;
  }

  bool Done() const {
    return step_ >= max_local_ || (sync_ ? global_step_ >= total_steps_ : step_ >= total_steps_);
  }

  absl::Status RunStep() {
    result_.schedule_step = step_;
    ++step_;
    ++result_.steps;
    result_.last_global_step = global_step_;
    const int b = cur_;
    PSTRAIN_RETURN_IF_ERROR(AwaitParameters(b));
    MaybeStall();
    PSTRAIN_ASSIGN_OR_RETURN(Batch batch, TakeBatch());
    PSTRAIN_ASSIGN_OR_RETURN(model::BatchResult br, Compute(batch, b));
    if (batch.embedded != nullptr) PushRows(batch.embedded);
    if (!job_.push_per_layer) PushModel(b);
    // Sync tables: the next step's rows are those after this step's round,
    // so their pull goes behind this step's pushes (and waits on the PS for
    // the other replicas').
    if (sync_tables_) PSTRAIN_RETURN_IF_ERROR(QueueRows(step_ + 1));
    if (batch.embedded != nullptr && prepared_ == step_ + 1 && WantsRows(step_ + 2)) {
      PSTRAIN_RETURN_IF_ERROR(PrepareBatch(step_ + 2));
    }
    PSTRAIN_RETURN_IF_ERROR(FinishStep(b));
    return Report(br);
  }

  // The parameters in buffer b are those the last round written into it
  // brought back.
  absl::Status AwaitParameters(int b) {
    if (written_by_[b] > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(global_step_, rounds_.WaitFor(written_by_[b]));
    }
    return absl::OkStatus();
  }

  // Straggler injection (TrainerOptions::step_delay).
  void MaybeStall() {
    if (options_.step_delay > absl::ZeroDuration() &&
        (options_.step_delay_probability >= 1 ||
         stall_(stall_rng_) < options_.step_delay_probability)) {
      absl::SleepFor(options_.step_delay);
    }
  }

  // Whether step s's rows are pulled: every step of the schedule; sync
  // replicas go on past it until the PS reach its end.
  bool WantsRows(int64_t s) const { return sync_ || s <= total_steps_; }

  // Gathers batch `s` (the one after the last gathered) into its place in
  // the pipeline and makes its bags. The place's last user, step s-4,
  // pushed its rows at the latest with the pull of step s-2's rows (in its
  // frame, or queued before it); rounds run in order, and every caller,
  // the end of step s-2 or the start of step s-1, has waited for that
  // pull: the place is free.
  absl::Status PrepareBatch(int64_t s) {
    EmbeddedBatch& eb = pipeline_[s % pipeline_.size()];
    PSTRAIN_RETURN_IF_ERROR(
        prefetch_->Next(eb.x.data(), eb.y.data(), eb.ids.empty() ? nullptr : eb.ids.data())
            .status());
    PSTRAIN_RETURN_IF_ERROR(
        embeddings_.MakeBags(eb.x.data(), eb.ids.data(), ids_dim_, job_.batch_size, &eb.lookups));
    prepared_ = s;
    return absl::OkStatus();
  }

  // Queues the pull of batch s's rows, gathering the batch first unless the
  // step before did (RunStep).
  absl::Status QueueRows(int64_t s) {
    if (prepared_ < s) PSTRAIN_RETURN_IF_ERROR(PrepareBatch(s));
    EmbeddedBatch& eb = pipeline_[s % pipeline_.size()];
    client::PsClient* client = client_;
    const model::Embeddings* embeddings = &embeddings_;
    EmbeddedBatch* pushed = std::exchange(held_push_, nullptr);
    eb.pulled_by =
        RowRounds().Enqueue([client, embeddings, &eb, pushed]() -> absl::StatusOr<int64_t> {
          // Every table's rows in one exchange with each PS, behind the
          // held push of an earlier step's row gradients.
          std::vector<client::PsClient::TableRows> tables(embeddings->size());
          for (int i = 0; i < embeddings->size(); ++i) {
            tables[i] = {(*embeddings)[i].spec().table(), eb.lookups.bags[i].unique_ids,
                         eb.lookups.rows[i].data(), nullptr};
          }
          if (pushed == nullptr) {
            PSTRAIN_RETURN_IF_ERROR(client->PullRows(tables));
          } else {
            PSTRAIN_RETURN_IF_ERROR(client->PushPullRows(RowGrads(*embeddings, *pushed), tables));
          }
          return int64_t{0};
        });
    if (pushed != nullptr) last_row_push_ = eb.pulled_by;
    return absl::OkStatus();
  }

  // Each table's row gradients of `b` (its ids and their gradient rows).
  static std::vector<client::PsClient::TableRows> RowGrads(const model::Embeddings& embeddings,
                                                           const EmbeddedBatch& b) {
    std::vector<client::PsClient::TableRows> tables(embeddings.size());
    for (int i = 0; i < embeddings.size(); ++i) {
      tables[i] = {embeddings[i].spec().table(), b.lookups.bags[i].unique_ids, nullptr,
                   b.lookups.row_grads[i].data()};
    }
    return tables;
  }

  // This step's examples: the next prefetched batch, or, with embeddings,
  // the pipeline's (once its rows are in), queueing the next one's.
  absl::StatusOr<Batch> TakeBatch() {
    Batch batch;
    if (embeddings_.empty()) {
      PSTRAIN_RETURN_IF_ERROR(prefetch_->Next(x_.data(), y_.data()).status());
      batch.x = x_.data();
      batch.y = y_.data();
      return batch;
    }
    batch.embedded = &pipeline_[step_ % pipeline_.size()];
    PSTRAIN_RETURN_IF_ERROR(RowRounds().WaitFor(batch.embedded->pulled_by).status());
    if (!sync_tables_ && WantsRows(step_ + 1)) {
      PSTRAIN_RETURN_IF_ERROR(QueueRows(step_ + 1));
    }
    batch.x = batch.embedded->x.data();
    batch.y = batch.embedded->y.data();
    return batch;
  }

  // Forward and backward on buffer b's parameters; with push_per_layer,
  // each layer's gradient goes out as soon as backprop has produced it (the
  // layer's variables are the layout's).
  absl::StatusOr<model::BatchResult> Compute(const Batch& batch, int b) {
    const float* g = grads_[b].data();
    float* p = params_[b].data();
    std::function<void(int)> on_layer_done;
    if (job_.push_per_layer) {
      on_layer_done = [this, b, g, p](int l) {
        const std::vector<int>* vars = &mlp_->layout().LayerVariables(l);
        client::PsClient* client = client_;
        const std::vector<int64_t>* offsets = &this->offsets();
        written_by_[b] = rounds_.Enqueue([client, vars, g, p, offsets] {
          return client->PushPullVariables(*vars, g, p, *offsets);
        });
      };
    }
    backend_->SetStepSeed(model::StepSeed(job_.seed, options_.replica, step_));
    const float* input = batch.x;
    if (batch.embedded != nullptr) {
      embeddings_.Forward(batch.embedded->lookups, emb_out_.data());
      input = emb_out_.data();
    }
    return backend_->ComputeGradients(params_[b].data(), input, batch.y, job_.batch_size,
                                      grads_[b].data(), on_layer_done,
                                      batch.embedded != nullptr ? emb_grad_.data() : nullptr);
  }

  // Each table's row gradients, pushed behind the step. Async and ssp
  // tables: held until the next rows' pull is queued (the next step's
  // TakeBatch, right after this step), to go in its frame: one row round
  // trip per step instead of two, with the push still ahead of that pull.
  void PushRows(EmbeddedBatch* now) {
    embeddings_.Backward(emb_grad_.data(), &now->lookups);
    if (!sync_tables_) {
      held_push_ = now;
      return;
    }
    SendRowPush(now);
  }

  void SendRowPush(EmbeddedBatch* now) {
    client::PsClient* client = client_;
    const model::Embeddings* embeddings = &embeddings_;
    last_row_push_ = RowRounds().Enqueue([client, embeddings, now]() -> absl::StatusOr<int64_t> {
      PSTRAIN_RETURN_IF_ERROR(client->PushRows(RowGrads(*embeddings, *now)));
      return int64_t{0};
    });
  }

  // The whole model in one push-then-pull after the step.
  void PushModel(int b) {
    client::PsClient* client = client_;
    const float* g = grads_[b].data();
    float* p = params_[b].data();
    const std::vector<int64_t>* offsets = &this->offsets();
    written_by_[b] =
        rounds_.Enqueue([client, g, p, offsets] { return client->PushPullAll(g, p, *offsets); });
  }

  // Overlapping: the next step computes on the other buffer. Else: wait for
  // this step's rounds.
  absl::Status FinishStep(int b) {
    if (overlap_) {
      cur_ = 1 - cur_;
      return absl::OkStatus();
    }
    PSTRAIN_ASSIGN_OR_RETURN(global_step_, rounds_.WaitFor(written_by_[b]));
    return absl::OkStatus();
  }

  // Adds the step to the logging window; every log_every_steps steps (and
  // at the last) a Keras-like progress line and the summaries.
  absl::Status Report(const model::BatchResult& br) {
    const int64_t shown = sync_ ? std::min(global_step_, total_steps_) : step_;
    const bool last = sync_ ? global_step_ >= total_steps_ : step_ == total_steps_;
    window_.Add(br);
    ++window_steps_;
    if (step_ % options_.log_every_steps != 0 && !last) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const double elapsed = absl::ToDoubleSeconds(now - start_);
    const double window_seconds = std::max(1e-9, absl::ToDoubleSeconds(now - window_start_));
    const double rate = window_.count / window_seconds;
    const double eta = (total_steps_ - shown) * job_.batch_size / std::max(rate, 1e-9);
    result_.final_loss = window_.mean_loss();
    result_.final_accuracy = window_.accuracy();
    Log(ProgressLine(shown, total_steps_, window_, rate, elapsed, eta));
    if (summaries_ != nullptr) {
      // At the job's global step, as the evaluator's scores are, so that the
      // curves share an axis and go on from a checkpoint after a resume;
      // never backwards within a run.
      summary_step_ = std::max(summary_step_, global_step_);
      PSTRAIN_RETURN_IF_ERROR(summaries_->WriteScalars(
          summary_step_, ProgressScalars(window_, rate, window_steps_ / window_seconds,
                                         global_step_, job_.optimizer.learning_rate)));
    }
    window_ = model::BatchResult();
    window_start_ = now;
    window_steps_ = 0;
    return absl::OkStatus();
  }

  absl::Status Drain() {
    // The last step's row gradients, if no pull followed to carry them.
    if (held_push_ != nullptr) SendRowPush(std::exchange(held_push_, nullptr));
    PSTRAIN_RETURN_IF_ERROR(RowRounds().WaitFor(last_row_push_).status());
    return rounds_.WaitFor(std::max(written_by_[0], written_by_[1])).status();
  }

  // Where table rows' rounds run: beside the dense rounds, in a queue of
  // their own, so that a step's row pull and push do not wait behind its
  // dense round trip (nor it behind them); rows stay in order among
  // themselves (QueueRows). Sync tables: in the dense queue, as their
  // rounds follow each step's (RunStep).
  RoundTrips& RowRounds() { return sync_tables_ ? rounds_ : row_rounds_; }

  const std::vector<int64_t>& offsets() const { return mlp_->offsets(); }

  const TrainerOptions& options_;
  const int64_t continue_at_;
  const model::JobSpec& job_;
  client::PsClient* const client_;
  model::Backend* const backend_;
  const model::Network* const mlp_;
  const model::Embeddings& embeddings_;
  EventWriter* const summaries_;
  TrainerResult& result_;
  data::BatchSource& source_;
  std::mt19937_64 stall_rng_;
  std::uniform_real_distribution<double> stall_{0, 1};
  const int64_t ids_dim_;

  // The schedule (Plan).
  bool sync_ = false;
  bool sync_tables_ = false;
  bool overlap_ = false;
  int64_t total_steps_ = 0;
  int64_t max_local_ = 0;

  std::vector<float> params_[2], grads_[2];
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::array<EmbeddedBatch, 4> pipeline_;
  std::vector<float> emb_out_, emb_grad_;
  std::optional<data::Prefetcher> prefetch_;

  int64_t step_ = 0;
  int64_t global_step_ = 0;
  int64_t summary_step_ = 0;  // of the last summaries written
  // The ticket of the last round queued to write into params_[b].
  int64_t written_by_[2] = {0, 0};
  int64_t last_row_push_ = 0;
  int64_t prepared_ = 0;  // the last step whose batch the pipeline gathered
  // Async and ssp tables: the step whose row gradients wait to go out with
  // the next rows' pull (PushRows).
  EmbeddedBatch* held_push_ = nullptr;
  int cur_ = 0;
  model::BatchResult window_;
  int64_t window_steps_ = 0;
  absl::Time start_, window_start_;

  // Declared last: destroyed first, they run what is still queued while
  // everything their rounds use is alive.
  RoundTrips row_rounds_;
  RoundTrips rounds_;
};

absl::Status TrainFrom(const TrainerOptions& options, data::BatchSource* source,
                       client::PsClient* client, model::Backend* backend, EventWriter* summaries,
                       TrainerResult* result, int64_t continue_at) {
  StepLoop loop(options, source, client, backend, summaries, result, continue_at);
  return loop.Run();
}

}  // namespace

absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options, data::BatchSource* source,
                                         client::PsClient* client) {
  const model::JobSpec& job = options.job;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                           model::CreateBackend(job.model, job.batch_size, job.device));
  Log("replica ", options.replica, " computes on ", backend->Describe());
  if (source->example_dim() != job.model.input_dim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("data examples have %d features but the model's input_dim is %d",
                        source->example_dim(), job.model.input_dim));
  }
  std::unique_ptr<EventWriter> summaries;
  if (!options.summary_dir.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(summaries, EventWriter::Open(options.summary_dir));
  }
  TrainerResult result;
  const absl::Time start = absl::Now();
  int64_t continue_at = -1;
  while (true) {
    absl::Status s =
        TrainFrom(options, source, client, backend.get(), summaries.get(), &result, continue_at);
    if (s.ok()) break;
    // A PS lost (Unavailable) or restored under the replica (Aborted): the
    // chief puts every PS back on the newest checkpoint; carry on from it.
    if (s.code() == absl::StatusCode::kDeadlineExceeded && !options.replica_names.empty()) {
      std::vector<std::string> names;
      for (size_t r = 0; r < options.replica_names.size(); ++r) {
        names.push_back(absl::StrCat(r, " is ", options.replica_names[r]));
      }
      return absl::DeadlineExceededError(
          absl::StrCat(s.message(), " (replica ", absl::StrJoin(names, ", "), ")"));
    }
    if (options.recovery_wait <= absl::ZeroDuration() ||
        (s.code() != absl::StatusCode::kUnavailable && s.code() != absl::StatusCode::kAborted)) {
      return s;
    }
    const int64_t generation = client->generation();
    Log("lost the ps at global step ", result.last_global_step, ": ", s.message(),
        "; waiting up to ", absl::FormatDuration(options.recovery_wait),
        " for every ps to serve one generation again");
    const absl::Time lost = absl::Now();
    PSTRAIN_RETURN_IF_ERROR(client->WaitUntilReady(options.recovery_wait, true));
    ++result.recoveries;
    const std::string after =
        absl::FormatDuration(absl::Trunc(absl::Now() - lost, absl::Milliseconds(1)));
    if (client->generation() == generation) {
      // Nothing was restored: the PS kept their variables. The step that
      // failed and the two before it (overlapped rounds in flight) run
      // again: async steps, so a repeat costs less than a step lost.
      continue_at = std::max<int64_t>(0, result.schedule_step - 2);
      Log("the ps are back after ", after, ", still at generation ", generation,
          " (nothing restored); carrying on");
      continue;
    }
    continue_at = -1;
    Log("the ps were restored to the checkpoint at global step ", client->restored_step(),
        " (generation ", client->generation(), ", was ", generation, ") after ", after,
        "; global steps lost: ",
        std::max<int64_t>(0, result.last_global_step - client->restored_step()));
  }
  result.examples = result.steps * job.batch_size;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec = result.examples / std::max(result.seconds, 1e-9);
  return result;
}

}  // namespace pstrain::train
