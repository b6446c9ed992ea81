#include "train/trainer.h"

#include <array>
#include <cstdio>
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
#include "base/event_file.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cluster/optimizer_spec.h"
#include "data/prefetcher.h"
#include "model/backend.h"
#include "model/embeddings.h"
#include "model/network.h"
#include "train/progress.h"

namespace pstrain::train {
namespace {

// One batch on its way through the embeddings: its examples, their ids,
// and each table's lookups, rows and row gradients.
struct EmbeddedBatch {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> ids;  // when an embedding reads the input's id features
  model::EmbeddingBatch lookups;
  client::ParameterStore::Ticket pulled_by;  // of the round pulling its rows
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
  StepLoop(const TrainerOptions& options, data::BatchSource* source, client::ParameterStore* store,
           model::Backend* backend, EventWriter* summaries, TrainerResult* result,
           int64_t continue_at)
      : options_(options),
        continue_at_(continue_at),
        job_(options.job),
        store_(store),
        backend_(backend),
        net_(&backend->network()),
        embeddings_(net_->embeddings()),
        clipping_(job_.optimizer.clipnorm > 0 || job_.optimizer.clipvalue > 0),
        summaries_(summaries),
        result_(*result),
        source_(*source),
        stall_rng_(job_.seed * 7919 + options.replica),
        ids_dim_(source->ids_dim()) {}

  absl::Status Run() {
    PSTRAIN_RETURN_IF_ERROR(Plan());
    PSTRAIN_RETURN_IF_ERROR(Start());
    StepObserver* observer = options_.observer;
    while (!Done()) {
      if (observer != nullptr && (result_.stopped_by = observer->StopBefore(step_ + 1)) != 0) {
        break;
      }
      PSTRAIN_RETURN_IF_ERROR(RunStep());
      if (observer != nullptr) {
        // Not training time: the observer's scores and checkpoints.
        const absl::Time before = absl::Now();
        PSTRAIN_RETURN_IF_ERROR(observer->AfterStep(step_, total_steps_));
        const absl::Duration spent = absl::Now() - before;
        paused_ += spent;
        window_start_ += spent;
      }
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
    sync_ = job_.consistency.sync();
    const int aggregate =
        job_.replicas_to_aggregate > 0 ? job_.replicas_to_aggregate : options_.num_replicas;
    const int64_t batches = job_.consistency.async() ? source_.batches_per_epoch()
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
    overlap_ = options_.overlap_communication && !sync_ && !options_.exact;
    for (int b = 0; b < (overlap_ ? 2 : 1); ++b) {
      params_[b].resize(net_->num_parameters());
      grads_[b].resize(net_->num_parameters());
    }
    // What each layer pushes: its variables but frozen ones (trainable:
    // false), which no step changes.
    pushed_of_layer_.resize(net_->layout().num_layers());
    bool any_frozen = false;
    pushed_.clear();
    for (int l = 0; l < net_->layout().num_layers(); ++l) {
      for (int v : net_->layout().LayerVariables(l)) {
        if (net_->variables()[v].update == VariableUpdate::kFrozen) {
          any_frozen = true;
        } else {
          pushed_of_layer_[l].push_back(v);
          pushed_.push_back(v);
        }
      }
    }
    if (!any_frozen) pushed_.clear();  // every one: StartDense's empty list
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
    sync_tables_ = sync_ && !embeddings_.empty() && net_->spec().sync_tables;
    rows_behind_pushes_ = sync_tables_ || (options_.exact && !embeddings_.empty());
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
    if (sync_) store_->set_stop_step(total_steps_);
    PSTRAIN_ASSIGN_OR_RETURN(global_step_, store_->PullAll(params_[0].data()));
    // A job restored from a checkpoint carries on from the checkpoint's
    // step: this replica's steps so far (async steps count every replica's
    // pushes; sync and ssp steps are each replica's), and its place in the
    // data.
    if (options_.start_at >= 0) {
      step_ = std::min(total_steps_, options_.start_at);
    } else if (continue_at_ >= 0) {
      step_ = std::min(total_steps_, continue_at_);
      Log("carrying on at this replica's step ", step_);
    } else if (const int64_t restored = store_->restored_step(); restored > 0) {
      std::string how;
      step_ = std::min(total_steps_, OwnStep(restored, &how));
      const int64_t per_epoch = std::max<int64_t>(1, source_.batches_per_epoch());
      Log("resuming from the checkpoint at global step ", restored, ": this replica's step ", step_,
          how, ", its input at batch ", step_ % per_epoch, " of ", per_epoch, " in epoch ",
          step_ / per_epoch);
    } else if (global_step_ > 0) {
      // The job went on before this replica started (a restart of it, the
      // chief's or a worker's, a late start): it carries on where the PS
      // say it is, never from 0 because its process is new.
      std::string how;
      step_ = std::min(total_steps_, OwnStep(global_step_, &how));
      const int64_t per_epoch = std::max<int64_t>(1, source_.batches_per_epoch());
      Log("the job is at global step ", global_step_, ": carrying on at this replica's step ",
          step_, how, ", its input at batch ", step_ % per_epoch, " of ", per_epoch,
          " in epoch ", step_ / per_epoch);
    }
    // The source may be where an earlier attempt's prefetcher left it.
    PSTRAIN_RETURN_IF_ERROR(source_.Seek(step_));
    // Batches are gathered on a background thread, a few steps ahead.
    prefetch_.emplace(&source_, 4, embeddings_.reads_ids());
    if (options_.start_at < 0) {
      Log("training replica ", options_.replica, " of ", options_.num_replicas, ": ",
          total_steps_, " steps of batch ", job_.batch_size, " (", source_.shard_size(),
          " examples in this shard)");
    }
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
    if (job_.consistency.sync()) return global;
    absl::StatusOr<int64_t> own = store_->ReplicaPushes(options_.replica);
    if (own.ok()) {
      *how = " (its pushes the ps applied)";
      return *own;
    }
    *how = absl::StrCat(" (from the global step: ", own.status().message(), ")");
    return job_.consistency.async() ? global / std::max(options_.num_replicas, 1) : global;
  }

  bool Done() const {
    return step_ >= max_local_ || (sync_ ? global_step_ >= total_steps_ : step_ >= total_steps_);
  }

  absl::Status RunStep() {
    result_.schedule_step = step_;
    ++step_;
    // Async and ssp pushes are numbered by the step they end, so that one
    // sent again (after a resume from the fewest count over the slices) is
    // applied once in each; a sync round's version does that already.
    store_->set_push_number(sync_ ? 0 : step_);
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
    if (rows_behind_pushes_) PSTRAIN_RETURN_IF_ERROR(QueueRows(step_ + 1));
    if (batch.embedded != nullptr && prepared_ == step_ + 1 && WantsRows(step_ + 2)) {
      PSTRAIN_RETURN_IF_ERROR(PrepareBatch(step_ + 2));
    }
    PSTRAIN_RETURN_IF_ERROR(FinishStep(b));
    return Report(br);
  }

  // The parameters in buffer b are those the last round written into it
  // brought back.
  absl::Status AwaitParameters(int b) {
    if (written_by_[b].number > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(global_step_, store_->Wait(written_by_[b]));
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
    std::vector<client::TableRows> tables(embeddings_.size());
    for (int i = 0; i < embeddings_.size(); ++i) {
      tables[i] = {embeddings_[i].spec().table(), eb.lookups.bags[i].unique_ids,
                   eb.lookups.rows[i].data(), nullptr};
    }
    // Every table's rows in one exchange with each PS, behind the held push
    // of an earlier step's row gradients.
    EmbeddedBatch* pushed = std::exchange(held_push_, nullptr);
    const std::vector<client::TableRows> grads =
        pushed == nullptr ? std::vector<client::TableRows>() : RowGrads(embeddings_, *pushed);
    eb.pulled_by = store_->StartRows(grads, tables, RowQueue());
    if (pushed != nullptr) last_row_push_ = eb.pulled_by;
    return absl::OkStatus();
  }

  // Each table's row gradients of `b` (its ids and their gradient rows).
  static std::vector<client::TableRows> RowGrads(const model::Embeddings& embeddings,
                                                 const EmbeddedBatch& b) {
    std::vector<client::TableRows> tables(embeddings.size());
    for (int i = 0; i < embeddings.size(); ++i) {
      tables[i] = {embeddings[i].spec().table(), b.lookups.bags[i].unique_ids, nullptr,
                   b.lookups.row_grads[i].data(), /*distinct=*/true};
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
    PSTRAIN_RETURN_IF_ERROR(store_->Wait(batch.embedded->pulled_by).status());
    if (!rows_behind_pushes_ && WantsRows(step_ + 1)) {
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
        const std::vector<int>& variables = pushed_of_layer_[l];
        if (variables.empty()) return;  // a frozen layer
        ClipGradients(b, variables);
        written_by_[b] = store_->StartDense(variables, g, p);
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
    if (!rows_behind_pushes_) {
      held_push_ = now;
      return;
    }
    SendRowPush(now);
  }

  void SendRowPush(EmbeddedBatch* now) {
    last_row_push_ = store_->StartRows(RowGrads(embeddings_, *now), {}, RowQueue());
  }

  // The whole model (but its frozen variables) in one push-then-pull
  // after the step.
  void PushModel(int b) {
    if (clipping_) {
      std::vector<int> all(net_->variables().size());
      for (size_t v = 0; v < all.size(); ++v) all[v] = static_cast<int>(v);
      ClipGradients(b, all);
    }
    written_by_[b] = store_->StartDense(pushed_, grads_[b].data(), params_[b].data());
  }

  // Keras's clipnorm or clipvalue on each of `variables`' gradients in
  // buffer b, before they leave the replica (not on a non-trainable
  // variable's increments).
  void ClipGradients(int b, const std::vector<int>& variables) {
    if (!clipping_) return;
    for (int v : variables) {
      if (!net_->variables()[v].trainable()) continue;
      ClipGradient(job_.optimizer, grads_[b].data() + net_->offsets()[v],
                   net_->variables()[v].elements());
    }
  }

  // Overlapping: the next step computes on the other buffer. Else: wait for
  // this step's rounds.
  absl::Status FinishStep(int b) {
    if (overlap_) {
      cur_ = 1 - cur_;
      return absl::OkStatus();
    }
    PSTRAIN_ASSIGN_OR_RETURN(global_step_, store_->Wait(written_by_[b]));
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
          summary_step_,
          ProgressScalars(window_, rate, window_steps_ / window_seconds, global_step_,
                          ScheduledLearningRate(job_.optimizer, global_step_ + 1))));
    }
    window_ = model::BatchResult();
    window_start_ = now;
    window_steps_ = 0;
    return absl::OkStatus();
  }

  absl::Status Drain() {
    // The last step's row gradients, if no pull followed to carry them.
    if (held_push_ != nullptr) SendRowPush(std::exchange(held_push_, nullptr));
    PSTRAIN_RETURN_IF_ERROR(store_->Wait(last_row_push_).status());
    // Rounds of one queue end in order: the later of the two buffers'.
    PSTRAIN_RETURN_IF_ERROR(store_->Wait(written_by_[0]).status());
    PSTRAIN_RETURN_IF_ERROR(store_->Wait(written_by_[1]).status());
    result_.train_seconds = absl::ToDoubleSeconds(absl::Now() - start_ - paused_);
    result_.input_wait_seconds = absl::ToDoubleSeconds(prefetch_->waited());
    return absl::OkStatus();
  }

  // Where table rows' rounds run: beside the dense rounds, in a queue of
  // their own, so that a step's row pull and push do not wait behind its
  // dense round trip (nor it behind them); rows stay in order among
  // themselves (QueueRows). Sync tables: in the dense queue, as their
  // rounds follow each step's (RunStep).
  client::ParameterStore::Queue RowQueue() const {
    return sync_tables_ ? client::ParameterStore::Queue::kDense
                        : client::ParameterStore::Queue::kRows;
  }

  const TrainerOptions& options_;
  const int64_t continue_at_;
  const model::JobSpec& job_;
  client::ParameterStore* const store_;
  model::Backend* const backend_;
  const model::Network* const net_;
  const model::Embeddings& embeddings_;
  const bool clipping_;  // clipnorm or clipvalue
  EventWriter* const summaries_;
  TrainerResult& result_;
  data::BatchSource& source_;
  std::mt19937_64 stall_rng_;
  std::uniform_real_distribution<double> stall_{0, 1};
  const int64_t ids_dim_;

  // The schedule (Plan).
  bool sync_ = false;
  bool sync_tables_ = false;
  // A step's rows are pulled behind the previous step's row pushes (sync
  // tables, exact); else ahead of them, overlapping the step before.
  bool rows_behind_pushes_ = false;
  bool overlap_ = false;
  int64_t total_steps_ = 0;
  int64_t max_local_ = 0;

  std::vector<float> params_[2], grads_[2];
  // Per layer of the layout, the variables it pushes; the flat array's
  // variables but the frozen ones (empty: all of them, none being frozen).
  std::vector<std::vector<int>> pushed_of_layer_;
  std::vector<int> pushed_;
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::array<EmbeddedBatch, 4> pipeline_;
  std::vector<float> emb_out_, emb_grad_;
  std::optional<data::Prefetcher> prefetch_;

  int64_t step_ = 0;
  int64_t global_step_ = 0;
  int64_t summary_step_ = 0;  // of the last summaries written
  // The last round queued to write into params_[b].
  client::ParameterStore::Ticket written_by_[2];
  client::ParameterStore::Ticket last_row_push_;
  int64_t prepared_ = 0;  // the last step whose batch the pipeline gathered
  // Async and ssp tables: the step whose row gradients wait to go out with
  // the next rows' pull (PushRows).
  EmbeddedBatch* held_push_ = nullptr;
  int cur_ = 0;
  model::BatchResult window_;
  int64_t window_steps_ = 0;
  absl::Time start_, window_start_;
  absl::Duration paused_;  // in the observer
};

absl::Status TrainFrom(const TrainerOptions& options, data::BatchSource* source,
                       client::ParameterStore* store, model::Backend* backend,
                       EventWriter* summaries, TrainerResult* result, int64_t continue_at) {
  StepLoop loop(options, source, store, backend, summaries, result, continue_at);
  const absl::Status s = loop.Run();
  // The loop's buffers go with it: every exchange naming them must end
  // first, and a failed attempt's errors must not outlive it.
  const absl::Status drained = store->Drain();
  return s.ok() ? drained : s;
}

}  // namespace

void ApplyStraggler(const std::string& task, TrainerOptions* options) {
  const auto& stragglers = options->job.stragglers;
  auto straggler = stragglers.find(task);
  if (straggler == stragglers.end()) straggler = stragglers.find("all");
  if (straggler == stragglers.end()) return;
  options->step_delay = absl::Milliseconds(straggler->second.ms);
  options->step_delay_probability = straggler->second.probability;
  Log("straggler: ", task, " sleeps ", straggler->second.ms, " ms before ",
      straggler->second.probability >= 1
          ? std::string("every step")
          : absl::StrCat("a step, on ", 100 * straggler->second.probability, "% of steps"));
}

absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options, data::BatchSource* source,
                                         client::ParameterStore* store) {
  const model::JobSpec& job = options.job;
  std::unique_ptr<model::Backend> own_backend;
  model::Backend* backend = options.backend;
  if (backend == nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(own_backend,
                             model::CreateBackend(job.model, job.batch_size, job.device));
    backend = own_backend.get();
    Log("replica ", options.replica, " computes on ", backend->Describe());
  }
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
        TrainFrom(options, source, store, backend, summaries.get(), &result, continue_at);
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
    const int64_t generation = store->generation();
    Log("lost the ps at global step ", result.last_global_step, ": ", s.message(),
        "; waiting up to ", absl::FormatDuration(options.recovery_wait),
        " for every ps to serve one generation again");
    const absl::Time lost = absl::Now();
    PSTRAIN_RETURN_IF_ERROR(store->WaitUntilReady(options.recovery_wait));
    ++result.recoveries;
    const std::string after =
        absl::FormatDuration(absl::Trunc(absl::Now() - lost, absl::Milliseconds(1)));
    if (store->generation() == generation) {
      // Nothing was restored: the PS kept their variables. The step that
      // failed and the two before it (overlapped rounds in flight) run
      // again: async steps, so a repeat costs less than a step lost.
      continue_at = std::max<int64_t>(0, result.schedule_step - 2);
      Log("the ps are back after ", after, ", still at generation ", generation,
          " (nothing restored); carrying on");
      continue;
    }
    continue_at = -1;
    Log("the ps were restored to the checkpoint at global step ", store->restored_step(),
        " (generation ", store->generation(), ", was ", generation, ") after ", after,
        "; global steps lost: ",
        std::max<int64_t>(0, result.last_global_step - store->restored_step()));
  }
  result.examples = result.steps * job.batch_size;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec = result.examples / std::max(result.seconds, 1e-9);
  return result;
}

}  // namespace pstrain::train
