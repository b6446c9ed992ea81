#include "train/trainer.h"

#include <array>
#include <cstdio>
#include <deque>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/prefetcher.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/event_file.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/backend.h"
#include "model/embedding_bag.h"
#include "model/mlp.h"

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
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return quit_ || !queue_.empty();
        };
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

// One batch on its way through an embedding bag: its examples, their ids,
// the rows those name and the rows' gradients.
struct BagBatch {
  std::vector<float> x;
  std::vector<int32_t> y;
  model::Bags bags;
  std::vector<float> rows, row_grads;
  int64_t pulled_by = 0;  // the ticket of the round pulling its rows
};

// Trains from the step the PS hold until the schedule ends; adds the steps
// it runs (and their loss) to `result` as it goes, so that they count when
// a lost PS ends it early.
absl::Status TrainFrom(const TrainerOptions& options, const data::Dataset& train,
                       client::PsClient* client, model::Backend* backend, EventWriter* summaries,
                       TrainerResult* result_out) {
  const model::JobSpec& job = options.job;
  const model::Mlp* mlp = &backend->network();
  // By file, this replica's files are its shard; by record, every R-th
  // example of the whole set.
  data::ShardIterator shard(&train, options.data_by_file ? 0 : options.replica,
                            options.data_by_file ? 1 : options.num_replicas, job.batch_size,
                            job.seed);
  const int64_t split_examples =
      options.split_examples > 0 ? options.split_examples : train.num_examples;
  if (shard.batches_per_epoch() == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "replica %d's shard has %d examples, fewer than one batch of %d",
        options.replica, shard.shard_size(), job.batch_size));
  }
  // Async replicas each run their own shard's schedule. Ssp replicas wait
  // for each other, so all run the same number of steps: that of the
  // smallest shard (shards differ by at most one example). Sync jobs count
  // aggregated steps, each of replicas_to_aggregate batches; every replica
  // (backups included) keeps pushing until the PS reach that global step.
  const bool sync = job.consistency == "sync";
  const int aggregate = job.replicas_to_aggregate > 0 ? job.replicas_to_aggregate
                                                      : options.num_replicas;
  const int64_t batches =
      job.consistency == "async" ? shard.batches_per_epoch()
      : sync                     ? split_examples / aggregate / job.batch_size
                                 : split_examples / options.num_replicas / job.batch_size;
  const int64_t total_steps = job.max_steps > 0 ? job.max_steps : job.epochs * batches;
  // Two sets of parameters and gradients when rounds overlap compute: one
  // in use by the model, one in flight.
  const model::EmbeddingBag* bag = mlp->bag();
  const bool overlap = options.overlap_communication && !sync;
  std::vector<float> params[2], grads[2];
  for (int b = 0; b < (overlap ? 2 : 1); ++b) {
    params[b].resize(mlp->num_parameters());
    grads[b].resize(mlp->num_parameters());
  }
  std::vector<float> x(static_cast<size_t>(job.batch_size) * train.example_dim);
  std::vector<int32_t> y(job.batch_size);
  // With an embedding bag, batches go through a pipeline of three: while
  // step s computes, the rows of step s+1's ids are being pulled and step
  // s-1's row gradients pushed (the table is async: step s+1's rows may
  // miss step s's update, as overlapped dense rounds do). The bag's output
  // (the dense layers' input) and its gradient are the step's own.
  std::array<BagBatch, 3> pipeline;
  std::vector<float> bag_out, bag_grad;
  if (bag != nullptr) {
    for (BagBatch& bb : pipeline) {
      bb.x.resize(x.size());
      bb.y.resize(y.size());
    }
    bag_out.resize(static_cast<size_t>(job.batch_size) * bag->dim());
    bag_grad.resize(bag_out.size());
  }
  const std::string table = bag != nullptr ? bag->spec().table() : std::string();
  const std::vector<int64_t>& offsets = mlp->offsets();
  if (sync) client->set_stop_step(total_steps);
  PSTRAIN_ASSIGN_OR_RETURN(int64_t global_step, client->PullAll(params[0].data(), offsets));
  // A job restored from a checkpoint carries on from the checkpoint's step:
  // this replica's steps so far (async steps count every replica's pushes;
  // sync and ssp steps are each replica's), and its place in the data.
  int64_t step = 0;
  if (const int64_t restored = client->restored_step(); restored > 0) {
    step = std::min(total_steps, job.consistency == "async"
                                     ? restored / std::max(options.num_replicas, 1)
                                     : restored);
    shard.Skip(step);
    Log("resuming from the checkpoint at global step ", restored, ": this replica's step ",
        step);
  }
  // Batches are gathered on a background thread, a few steps ahead.
  data::Prefetcher prefetch(&shard, job.batch_size, static_cast<int>(train.example_dim));

  Log("training replica ", options.replica, " of ", options.num_replicas, ": ",
      total_steps, " steps of batch ", job.batch_size, " (", shard.shard_size(),
      " examples in this shard)");
  TrainerResult& result = *result_out;
  model::BatchResult window;
  int64_t window_steps = 0;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  // Each step ends with push-then-pull round trips, one per layer as
  // backprop produces its gradient (or one for the whole model); the PS
  // makes the pulls wait as the consistency mode requires. Where the mode
  // allows (async, ssp), step s+1 is computed while step s's round trips
  // are in flight, on the parameters step s-1's round trips brought back.
  if (overlap) params[1] = params[0];
  // Layer l's variables are 2l (kernel) and 2l + 1 (bias).
  std::vector<std::vector<int>> layer_variables(job.model.layers.size());
  for (size_t l = 0; l < layer_variables.size(); ++l) {
    layer_variables[l] = {static_cast<int>(2 * l), static_cast<int>(2 * l + 1)};
  }
  // Declared after everything its rounds use, so that on an early return
  // its destructor (which runs what is still queued) comes first.
  RoundTrips rounds;
  // The ticket of the last round queued to write into params[b].
  int64_t written_by[2] = {0, 0};
  int cur = 0;
  // A bound on local steps that a sync replica cannot reach unless the PS
  // stop advancing, which the PS's own wait timeout reports first.
  const int64_t max_local = sync ? total_steps * options.num_replicas + 1 : total_steps;
  std::mt19937_64 stall_rng(job.seed * 7919 + options.replica);
  std::uniform_real_distribution<double> stall(0, 1);
  // Gathers batch `s` into its place in the pipeline and queues the pull of
  // its rows. The place's last user, step s-3, queued its push at its end,
  // before the pull of step s-1's rows was queued; rounds run in order, and
  // every caller has waited for that pull: the place is free.
  auto queue_rows = [&](int64_t s) {
    BagBatch& bb = pipeline[s % 3];
    prefetch.Next(bb.x.data(), bb.y.data());
    bag->MakeBags(bb.x.data(), job.batch_size, &bb.bags);
    bb.rows.resize(bb.bags.unique_ids.size() * bag->dim());
    bb.pulled_by = rounds.Enqueue([client, &table, &bb]() -> absl::StatusOr<int64_t> {
      PSTRAIN_RETURN_IF_ERROR(client->PullRows(table, bb.bags.unique_ids, bb.rows.data()));
      return int64_t{0};
    });
  };
  int64_t last_row_push = 0;
  if (bag != nullptr) queue_rows(step + 1);
  while (step < max_local && (sync ? global_step < total_steps : step < total_steps)) {
    ++step;
    ++result.steps;
    result.last_global_step = global_step;
    const int b = cur;
    if (written_by[b] > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(global_step, rounds.WaitFor(written_by[b]));
    }
    if (options.step_delay > absl::ZeroDuration() &&
        (options.step_delay_probability >= 1 || stall(stall_rng) < options.step_delay_probability)) {
      absl::SleepFor(options.step_delay);
    }
    const float* xs = x.data();
    const int32_t* ys = y.data();
    BagBatch* now = nullptr;
    if (bag == nullptr) {
      prefetch.Next(x.data(), y.data());
    } else {
      now = &pipeline[step % 3];
      PSTRAIN_RETURN_IF_ERROR(rounds.WaitFor(now->pulled_by).status());
      if (sync || step < total_steps) queue_rows(step + 1);
      xs = now->x.data();
      ys = now->y.data();
    }
    const float* g = grads[b].data();
    float* p = params[b].data();
    // Each layer's gradient goes out as soon as backprop has produced it.
    std::function<void(int)> on_layer_done;
    if (job.push_per_layer) {
      on_layer_done = [&, g, p](int l) {
        const std::vector<int>& vars = layer_variables[l];
        written_by[b] =
            rounds.Enqueue([client, &vars, g, p, &offsets] {
              return client->PushPullVariables(vars, g, p, offsets);
            });
      };
    }
    const float* input = xs;
    if (bag != nullptr) {
      bag->Forward(now->bags, now->rows.data(), bag_out.data());
      input = bag_out.data();
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult br,
        backend->ComputeGradients(params[b].data(), input, ys, job.batch_size, grads[b].data(),
                                  on_layer_done, bag != nullptr ? bag_grad.data() : nullptr));
    if (bag != nullptr) {
      now->row_grads.resize(now->rows.size());
      bag->Backward(now->bags, bag_grad.data(), now->row_grads.data());
      last_row_push = rounds.Enqueue([client, &table, now]() -> absl::StatusOr<int64_t> {
        PSTRAIN_RETURN_IF_ERROR(
            client->PushRows(table, now->bags.unique_ids, now->row_grads.data()));
        return int64_t{0};
      });
    }
    if (!job.push_per_layer) {
      written_by[b] = rounds.Enqueue(
          [client, g, p, &offsets] { return client->PushPullAll(g, p, offsets); });
    }
    if (overlap) {
      cur = 1 - cur;
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(global_step, rounds.WaitFor(written_by[b]));
    }
    const int64_t shown = sync ? std::min(global_step, total_steps) : step;
    const bool last = sync ? global_step >= total_steps : step == total_steps;
    window.loss_sum += br.loss_sum;
    window.correct += br.correct;
    window.count += br.count;
    ++window_steps;
    if (step % options.log_every_steps == 0 || last) {
      const absl::Time now = absl::Now();
      const double elapsed = absl::ToDoubleSeconds(now - start);
      const double window_seconds = std::max(1e-9, absl::ToDoubleSeconds(now - window_start));
      const double rate = window.count / window_seconds;
      const double eta = (total_steps - shown) * job.batch_size / std::max(rate, 1e-9);
      result.final_loss = window.loss_sum / window.count;
      result.final_accuracy = static_cast<double>(window.correct) / window.count;
      Log(absl::StrFormat("step %d/%d - loss %.4f - accuracy %.4f - %.0f examples/s - %.0fs elapsed - ETA %.0fs",
                          shown, total_steps, result.final_loss,
                          result.final_accuracy, rate, elapsed, eta));
      if (summaries != nullptr) {
        PSTRAIN_RETURN_IF_ERROR(summaries->WriteScalars(
            shown, {{"loss", result.final_loss},
                    {"accuracy", result.final_accuracy},
                    {"examples_per_sec", rate},
                    {"steps_per_sec", window_steps / window_seconds},
                    {"global_step", static_cast<double>(global_step)}}));
      }
      window = model::BatchResult();
      window_start = now;
      window_steps = 0;
    }
  }
  return rounds.WaitFor(std::max({written_by[0], written_by[1], last_row_push})).status();
}

}  // namespace

absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options,
                                         const data::Dataset& train,
                                         client::PsClient* client) {
  const model::JobSpec& job = options.job;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                           model::CreateBackend(job.model, job.batch_size, job.device));
  Log("replica ", options.replica, " computes on ", backend->Describe());
  if (train.example_dim != job.model.input_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data examples have %d features but the model's input_dim is %d",
        train.example_dim, job.model.input_dim));
  }
  std::unique_ptr<EventWriter> summaries;
  if (!options.summary_dir.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(summaries, EventWriter::Open(options.summary_dir));
  }
  TrainerResult result;
  const absl::Time start = absl::Now();
  while (true) {
    absl::Status s =
        TrainFrom(options, train, client, backend.get(), summaries.get(), &result);
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
        " for the chief to restore them");
    const absl::Time lost = absl::Now();
    PSTRAIN_RETURN_IF_ERROR(client->WaitUntilReady(options.recovery_wait, true, generation));
    ++result.recoveries;
    Log("the ps were restored to the checkpoint at global step ", client->restored_step(),
        " (generation ", client->generation(), ") after ",
        absl::FormatDuration(absl::Trunc(absl::Now() - lost, absl::Milliseconds(1))),
        "; global steps lost: ", std::max<int64_t>(0, result.last_global_step -
                                                          client->restored_step()));
  }
  result.examples = result.steps * job.batch_size;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec = result.examples / std::max(result.seconds, 1e-9);
  return result;
}

}  // namespace pstrain::train
