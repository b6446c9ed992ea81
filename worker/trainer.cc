#include "worker/trainer.h"

#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "data/prefetcher.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "model/backend.h"
#include "model/mlp.h"

namespace pstrain::worker {
namespace {

// Runs one push-then-pull at a time on its own thread, so the trainer can
// compute the next step while the last one's round trip is in flight.
class RoundTripThread {
 public:
  RoundTripThread() : thread_([this] { Loop(); }) {}
  ~RoundTripThread() {
    {
      absl::MutexLock lock(&mu_);
      quit_ = true;
    }
    thread_.join();
  }
  // REQUIRES: no round trip in flight (Wait() was called since the last Start).
  void Start(std::function<absl::StatusOr<int64_t>()> fn) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    job_ = std::move(fn);
    done_ = false;
  }
  absl::StatusOr<int64_t> Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return result_;
  }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    while (true) {
      std::function<absl::StatusOr<int64_t>()> job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](RoundTripThread* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
              return t->quit_ || t->job_ != nullptr;
            },
            this));
        if (job_ == nullptr) return;
        job = std::move(job_);
        job_ = nullptr;
      }
      absl::StatusOr<int64_t> r = job();
      absl::MutexLock lock(&mu_);
      result_ = std::move(r);
      done_ = true;
    }
  }

  absl::Mutex mu_;
  std::function<absl::StatusOr<int64_t>()> job_ ABSL_GUARDED_BY(mu_);
  absl::StatusOr<int64_t> result_ ABSL_GUARDED_BY(mu_) = int64_t{0};
  bool done_ ABSL_GUARDED_BY(mu_) = true;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options,
                                         const data::Dataset& train,
                                         PsClient* client) {
  const model::JobSpec& job = options.job;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend,
                           model::CreateBackend(job.model, job.batch_size, job.device));
  Log("replica ", options.replica, " computes on ", backend->Describe());
  const model::Mlp* mlp = &backend->network();
  if (train.example_dim != job.model.input_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data examples have %d features but the model's input_dim is %d",
        train.example_dim, job.model.input_dim));
  }
  data::ShardIterator shard(&train, options.replica, options.num_replicas,
                            job.batch_size, job.seed);
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
      : sync                     ? train.num_examples / aggregate / job.batch_size
                                 : train.num_examples / options.num_replicas / job.batch_size;
  const int64_t total_steps = job.max_steps > 0 ? job.max_steps : job.epochs * batches;
  // Two sets of parameters and gradients when rounds overlap compute: one
  // in use by the model, one in flight.
  const bool overlap = options.overlap_communication && !sync;
  std::vector<float> params[2], grads[2];
  for (int b = 0; b < (overlap ? 2 : 1); ++b) {
    params[b].resize(mlp->num_parameters());
    grads[b].resize(mlp->num_parameters());
  }
  std::vector<float> x(static_cast<size_t>(job.batch_size) * train.example_dim);
  std::vector<int32_t> y(job.batch_size);
  // Batches are gathered on a background thread, a few steps ahead.
  data::Prefetcher prefetch(&shard, job.batch_size, static_cast<int>(train.example_dim));
  const std::vector<int64_t>& offsets = mlp->offsets();

  Log("training replica ", options.replica, " of ", options.num_replicas, ": ",
      total_steps, " steps of batch ", job.batch_size, " (", shard.shard_size(),
      " examples in this shard)");
  TrainerResult result;
  model::BatchResult window;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  // Each step ends with one push-then-pull round trip per PS; the PS makes
  // the pull wait as the consistency mode requires. Where the mode allows
  // (async, ssp), step s+1 is computed while step s's round trip is in
  // flight, on the parameters step s-1's round trip brought back.
  if (sync) client->set_stop_step(total_steps);
  PSTRAIN_ASSIGN_OR_RETURN(int64_t global_step, client->PullAll(params[0].data(), offsets));
  if (overlap) params[1] = params[0];
  RoundTripThread round_trips;
  bool in_flight = false;
  int cur = 0;
  // A bound on local steps that a sync replica cannot reach unless the PS
  // stop advancing, which the PS's own wait timeout reports first.
  const int64_t max_local = sync ? total_steps * options.num_replicas + 1 : total_steps;
  int64_t step = 0;
  while (step < max_local && (sync ? global_step < total_steps : step < total_steps)) {
    ++step;
    prefetch.Next(x.data(), y.data());
    PSTRAIN_ASSIGN_OR_RETURN(
        model::BatchResult br,
        backend->ComputeGradients(params[cur].data(), x.data(), y.data(), job.batch_size,
                                  grads[cur].data()));
    if (in_flight) {
      in_flight = false;
      PSTRAIN_ASSIGN_OR_RETURN(global_step, round_trips.Wait());
    }
    const float* g = grads[cur].data();
    float* p = params[cur].data();
    if (!sync && step == total_steps) {
      PSTRAIN_RETURN_IF_ERROR(client->PushAll(g, offsets));
    } else if (overlap) {
      round_trips.Start([client, g, p, &offsets] { return client->PushPullAll(g, p, offsets); });
      in_flight = true;
      cur = 1 - cur;
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(global_step, client->PushPullAll(g, p, offsets));
    }
    const int64_t shown = sync ? std::min(global_step, total_steps) : step;
    const bool last = sync ? global_step >= total_steps : step == total_steps;
    window.loss_sum += br.loss_sum;
    window.correct += br.correct;
    window.count += br.count;
    if (step % options.log_every_steps == 0 || last) {
      const absl::Time now = absl::Now();
      const double elapsed = absl::ToDoubleSeconds(now - start);
      const double rate = window.count / std::max(1e-9, absl::ToDoubleSeconds(now - window_start));
      const double eta = (total_steps - shown) * job.batch_size / std::max(rate, 1e-9);
      result.final_loss = window.loss_sum / window.count;
      result.final_accuracy = static_cast<double>(window.correct) / window.count;
      Log(absl::StrFormat("step %d/%d - loss %.4f - accuracy %.4f - %.0f examples/s - %.0fs elapsed - ETA %.0fs",
                          shown, total_steps, result.final_loss,
                          result.final_accuracy, rate, elapsed, eta));
      window = model::BatchResult();
      window_start = now;
    }
  }
  result.steps = step;
  result.examples = step * job.batch_size;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.examples_per_sec = result.examples / std::max(result.seconds, 1e-9);
  return result;
}

}  // namespace pstrain::worker
