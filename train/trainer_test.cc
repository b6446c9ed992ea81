// The step loop against PS held in this process (client/in_process_store.h):
// sync replicas meet at every step, async ones run their own shards, a
// restore under a replica makes it carry on from the checkpoint's step, and
// a stop ends the schedule before the next step. Milliseconds each: no
// network, no processes.
#include "train/trainer.h"

#include <cmath>
#include <random>
#include <thread>

#include "client/create_request.h"
#include "client/in_process_store.h"
#include "base/testing/status_testing.h"
#include "data/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/ps_control.h"

namespace pstrain::train {
namespace {

// 512 examples of 16 features in 3 classes, the class a function of the
// features, so a model can learn it.
data::Dataset Examples() {
  data::Dataset d;
  d.num_examples = 512;
  d.example_dim = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < d.num_examples; ++i) {
    float sum = 0;
    for (int j = 0; j < d.example_dim; ++j) {
      d.features.push_back(u(rng));
      sum += d.features.back() * (j % 3 - 1);
    }
    d.labels.push_back(sum < -0.3f ? 0 : sum < 0.3f ? 1 : 2);
  }
  return d;
}

model::JobSpec Job(const std::string& consistency, int batch_size) {
  model::JobSpec job;
  job.model = model::NetworkSpec::FromWidths(16, {8}, 3);
  job.optimizer = {"sgd", 0.1f};
  job.consistency = *ParseConsistency(consistency);
  job.batch_size = batch_size;
  job.epochs = 2;
  job.seed = 9;
  job.device = model::Device::Cpu();
  return job;
}

// `num_ps` in-process PS holding `job`'s model for `replicas` replicas.
struct Cluster {
  std::unique_ptr<model::Network> net;
  Placement placement;
  std::vector<std::shared_ptr<ps::ShardStore>> stores;

  Cluster(const model::JobSpec& job, int num_ps, int replicas) {
    auto created = model::Network::Create(job.model, job.batch_size);
    EXPECT_OK(created);
    net = *std::move(created);
    auto placed = ComputePlacement(net->variables(), num_ps);
    EXPECT_OK(placed);
    placement = *placed;
    client::CreateOptions create;
    create.optimizer = job.optimizer;
    create.consistency = job.consistency;
    create.num_replicas = replicas;
    create.seed = job.seed;
    create.generation = 1;
    const std::vector<float> initial = net->InitialParameters(job.seed);
    for (int ps = 0; ps < num_ps; ++ps) {
      stores.push_back(std::make_shared<ps::ShardStore>(ps, num_ps));
      ps::PsControl control(stores.back().get());
      EXPECT_OK(control.CreateVariables(
          client::CreateRequestFor(placement, ps, initial, net->offsets(), create)));
    }
  }

  std::unique_ptr<client::InProcessStore> Store(int replica, const std::string& consistency) {
    client::InProcessOptions options;
    options.replica = replica;
    if (!consistency.empty()) options.consistency = *ParseConsistency(consistency);
    options.wait_timeout = absl::Seconds(10);
    auto store = client::InProcessStore::Create(stores, placement, net->offsets(), options);
    EXPECT_OK(store);
    EXPECT_OK((*store)->WaitUntilReady(absl::Seconds(1)));
    return *std::move(store);
  }

  std::vector<float> Values() {
    std::unique_ptr<client::InProcessStore> observer = Store(-1, "");
    std::vector<float> params(net->num_parameters());
    EXPECT_OK(observer->PullAll(params.data()).status());
    return params;
  }

  // The slowest PS's, past one holding frozen tensors alone (no step).
  int64_t GlobalStep() const {
    int64_t step = -1;
    for (const auto& s : stores) {
      const int64_t at = s->global_step();
      if (at >= 0) step = step < 0 ? at : std::min(step, at);
    }
    return step;
  }
};

TrainerOptions Options(const model::JobSpec& job, int replica, int replicas) {
  TrainerOptions options;
  options.job = job;
  options.replica = replica;
  options.num_replicas = replicas;
  options.log_every_steps = 1000;
  options.recovery_wait = absl::Seconds(5);
  return options;
}

// Two sync replicas of `job` on `cluster`, each on its shard of `examples`,
// on threads of their own.
std::vector<absl::StatusOr<TrainerResult>> RunTwoSyncReplicas(Cluster& cluster,
                                                              const model::JobSpec& job,
                                                              const data::Dataset& examples) {
  std::vector<absl::StatusOr<TrainerResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<client::InProcessStore> store = cluster.Store(r, "sync");
      TrainerOptions options = Options(job, r, 2);
      options.split_examples = examples.num_examples;
      data::ShardIterator shard(&examples, r, 2, job.batch_size, job.seed);
      results[r] = RunTrainer(options, &shard, store.get());
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(TrainerTest, TwoSyncReplicasEndWhereOneExactReplicaOfTheDoubleBatchEnds) {
  const data::Dataset examples = Examples();
  // Two sync replicas of batch 16 on 2 PS.
  const model::JobSpec sync = Job("sync", 16);
  Cluster two(sync, 2, 2);
  std::vector<absl::StatusOr<TrainerResult>> results = RunTwoSyncReplicas(two, sync, examples);
  ASSERT_OK(results[0]);
  ASSERT_OK(results[1]);
  // 512 examples / (2 x 16) per step, 2 epochs.
  EXPECT_EQ(results[0]->schedule_steps, 32);
  EXPECT_EQ(two.GlobalStep(), 32);

  // One replica of batch 32, every step applied before the next: its batch
  // k is the two shards' batches k together (shard r's j-th example is the
  // epoch's (r + 2j)-th), whose average a sync step applies.
  const model::JobSpec local = Job("async", 32);
  Cluster one(local, 1, 1);
  std::unique_ptr<client::InProcessStore> store = one.Store(0, "async");
  TrainerOptions options = Options(local, 0, 1);
  options.exact = true;
  data::ShardIterator all(&examples, 0, 1, local.batch_size, local.seed);
  ASSERT_OK_AND_ASSIGN(TrainerResult trained, RunTrainer(options, &all, store.get()));
  EXPECT_EQ(trained.steps, 32);
  EXPECT_EQ(one.GlobalStep(), 32);
  // The same gradients, summed in two halves: the same values to rounding,
  // after moving by far more than that.
  const std::vector<float> a = two.Values(), b = one.Values();
  const std::vector<float> initial = one.net->InitialParameters(local.seed);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double{a[i]} - b[i]));
    moved = std::max(moved, std::fabs(double{b[i]} - initial[i]));
  }
  EXPECT_GT(moved, 0.05);
  EXPECT_LT(diff, 1e-5);
}

// A batch normalization between two dense layers, the first frozen
// (trainable: false), on two sync replicas and 2 PS, pushing per layer and
// per model: each step applies the mean of the replicas' gradients and of
// their moving statistics' increments once, the frozen layer never moves
// and holds no step back. The reference replays the two shards' batches
// through the model by hand: each replica's gradients at the step's
// values, averaged, SGD on the trainable variables, added as they are to
// the statistics.
TEST(TrainerTest, SyncReplicasApplyTheirBatchNormIncrementsOnceAndFrozenLayersStay) {
  const data::Dataset examples = Examples();
  model::JobSpec job = Job("sync", 16);
  job.model.layers[0].trainable = false;
  model::LayerSpec bn;
  bn.kind = model::LayerKind::kBatchNormalization;
  bn.name = "bn";
  bn.momentum = 0.8f;
  job.model.layers.insert(job.model.layers.begin() + 1, bn);
  job.epochs = 1;
  for (bool per_layer : {false, true}) {
    SCOPED_TRACE(per_layer ? "per layer" : "whole model");
    job.push_per_layer = per_layer;
    Cluster cluster(job, 2, 2);
    std::vector<absl::StatusOr<TrainerResult>> results =
        RunTwoSyncReplicas(cluster, job, examples);
    ASSERT_OK(results[0]);
    ASSERT_OK(results[1]);
    EXPECT_EQ(cluster.GlobalStep(), 16);  // 512 / (2 x 16): the frozen layer holds nothing back

    model::Network& net = *cluster.net;
    std::vector<float> params = net.InitialParameters(job.seed);
    const std::vector<float> initial = params;
    data::ShardIterator shards[2] = {{&examples, 0, 2, job.batch_size, job.seed},
                                     {&examples, 1, 2, job.batch_size, job.seed}};
    std::vector<float> x(job.batch_size * 16), grads[2];
    std::vector<int32_t> y(job.batch_size);
    for (int step = 0; step < 16; ++step) {
      for (int r = 0; r < 2; ++r) {
        ASSERT_OK(shards[r].Next(x.data(), y.data()).status());
        grads[r].assign(params.size(), 0.0f);
        ASSERT_OK(net.ComputeGradients(params.data(), x.data(), y.data(), job.batch_size,
                                       grads[r].data())
                      .status());
      }
      for (size_t v = 0; v < net.variables().size(); ++v) {
        const VariableUpdate update = net.variables()[v].update;
        for (int64_t i = net.offsets()[v]; i < net.offsets()[v] + net.variables()[v].elements();
             ++i) {
          const float mean = (grads[0][i] + grads[1][i]) * 0.5f;
          if (update == VariableUpdate::kOptimizer) params[i] -= 0.1f * mean;
          if (update == VariableUpdate::kIncrement) params[i] += mean;
        }
      }
    }
    const std::vector<float> trained = cluster.Values();
    double diff = 0, stats_moved = 0;
    for (size_t v = 0; v < net.variables().size(); ++v) {
      const VariableDef& def = net.variables()[v];
      for (int64_t i = net.offsets()[v]; i < net.offsets()[v] + def.elements(); ++i) {
        if (def.update == VariableUpdate::kFrozen) {
          ASSERT_EQ(trained[i], initial[i]) << def.name;
        }
        if (def.update == VariableUpdate::kIncrement) {
          stats_moved = std::max(stats_moved, std::fabs(double{trained[i]} - initial[i]));
        }
        diff = std::max(diff, std::fabs(double{trained[i]} - params[i]));
      }
    }
    EXPECT_GT(stats_moved, 0.1);
    EXPECT_LT(diff, 1e-5);
  }
}

TEST(TrainerTest, AsyncReplicasRunTheirOwnShardsAndEveryPushCounts) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 2, 2);
  absl::StatusOr<TrainerResult> results[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<client::InProcessStore> store = cluster.Store(r, "async");
      data::ShardIterator shard(&examples, r, 2, job.batch_size, job.seed);
      results[r] = RunTrainer(Options(job, r, 2), &shard, store.get());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(results[r]);
    // 256 examples per shard, batch 32, 2 epochs.
    EXPECT_EQ(results[r]->steps, 16) << r;
    EXPECT_EQ(results[r]->schedule_steps, 16) << r;
  }
  // Every push applied once: the global step counts both replicas'.
  EXPECT_EQ(cluster.GlobalStep(), 32);
  std::unique_ptr<client::InProcessStore> observer = cluster.Store(-1, "");
  EXPECT_THAT(observer->ReplicaPushes(0), ::testing::Eq(absl::StatusOr<int64_t>(16)));
  EXPECT_THAT(observer->ReplicaPushes(1), ::testing::Eq(absl::StatusOr<int64_t>(16)));
}

// Rolls every PS back to its snapshot taken at step `at` (one step for
// all, or one per PS: a checkpoint cut that a push reached on some PS and
// not on others) under generation 2 when the replica reaches step `when`,
// as a chief restoring a lost PS does; counts the steps it sees.
class RestoreAt : public StepObserver {
 public:
  RestoreAt(Cluster* cluster, std::vector<int64_t> at, int64_t when)
      : cluster_(cluster), at_(std::move(at)), when_(when),
        snapshots_(cluster->stores.size()) {}
  absl::Status AfterStep(int64_t step, int64_t total) override {
    ++steps_;
    for (size_t ps = 0; ps < cluster_->stores.size(); ++ps) {
      if (step != at_[std::min(ps, at_.size() - 1)]) continue;
      auto shard = cluster_->stores[ps]->Snapshot(step);
      if (!shard.ok()) return shard.status();
      snapshots_[ps] = *std::move(shard);
    }
    if (step == when_ && !restored_) {
      restored_ = true;
      for (size_t ps = 0; ps < cluster_->stores.size(); ++ps) {
        absl::Status s = cluster_->stores[ps]->Restore(snapshots_[ps], 2);
        if (!s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }
  int64_t steps() const { return steps_; }

 private:
  Cluster* const cluster_;
  const std::vector<int64_t> at_;
  const int64_t when_;
  std::vector<ckpt::ShardContents> snapshots_;
  bool restored_ = false;
  int64_t steps_ = 0;
};

// Replica 0 of 1 through its whole schedule, exactly, with `observer`
// between steps.
absl::StatusOr<TrainerResult> TrainExactly(const data::Dataset& examples,
                                           const model::JobSpec& job,
                                           client::InProcessStore* store,
                                           StepObserver* observer) {
  TrainerOptions options = Options(job, 0, 1);
  options.exact = true;
  options.observer = observer;
  data::ShardIterator shard(&examples, 0, 1, job.batch_size, job.seed);
  return RunTrainer(options, &shard, store);
}

TEST(TrainerTest, ARestoreUnderTheReplicaMakesItCarryOnFromTheCheckpointsStep) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 2, 1);
  std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
  RestoreAt restore(&cluster, /*at=*/{4}, /*when=*/10);
  ASSERT_OK_AND_ASSIGN(TrainerResult trained,
                       TrainExactly(examples, job, store.get(), &restore));
  EXPECT_EQ(trained.recoveries, 1);
  EXPECT_EQ(store->generation(), 2);
  // Steps 5..10 were rolled back and run again: 32 steps of schedule, 38
  // run; the PS applied exactly the schedule, each push once.
  EXPECT_EQ(trained.schedule_steps, 32);
  EXPECT_EQ(restore.steps(), 32 + 6);
  EXPECT_EQ(cluster.GlobalStep(), 32);
  EXPECT_THAT(store->ReplicaPushes(0), ::testing::Eq(absl::StatusOr<int64_t>(32)));
}

class StopAt : public StepObserver {
 public:
  explicit StopAt(int64_t step) : step_(step) {}
  int StopBefore(int64_t step) override { return step > step_ ? 15 : 0; }

 private:
  const int64_t step_;
};

TEST(TrainerTest, APushThatACheckpointCutThroughIsAppliedOnceInEverySlice) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 2, 1);
  std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
  // ps:0 cut after push 5, ps:1 before it, both restored at step 10.
  RestoreAt restore(&cluster, /*at=*/{5, 4}, /*when=*/10);
  ASSERT_OK_AND_ASSIGN(TrainerResult trained,
                       TrainExactly(examples, job, store.get(), &restore));
  EXPECT_EQ(trained.recoveries, 1);
  // The replica carried on from the fewer count (4) and sent push 5 again:
  // ps:1 applied it, ps:0, which had it, answered without applying it.
  for (int ps : {0, 1}) {
    EXPECT_EQ(cluster.stores[ps]->global_step(), 32) << "ps:" << ps;
    for (const ps::TensorStats& t : cluster.stores[ps]->Stats()) {
      EXPECT_EQ(t.replica_pushes, std::vector<int64_t>{32}) << t.key;
      EXPECT_EQ(t.repeated_pushes, ps == 0 ? 1 : 0) << t.key;
    }
  }
}

// A replica whose process is new (a restarted chief's, a late worker's)
// carries on from the pushes the PS applied from it, not from step 0.
TEST(TrainerTest, ANewReplicaProcessCarriesOnFromItsPushesThePsApplied) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 2, 2);
  {
    std::unique_ptr<client::InProcessStore> store = cluster.Store(1, "async");
    data::ShardIterator shard(&examples, 1, 2, job.batch_size, job.seed);
    ASSERT_OK(RunTrainer(Options(job, 1, 2), &shard, store.get()).status());
  }
  {  // replica 0's first process, gone after 5 steps
    std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
    StopAt stop(5);
    TrainerOptions options = Options(job, 0, 2);
    options.observer = &stop;
    options.exact = true;
    data::ShardIterator shard(&examples, 0, 2, job.batch_size, job.seed);
    ASSERT_OK_AND_ASSIGN(TrainerResult first, RunTrainer(options, &shard, store.get()));
    EXPECT_EQ(first.steps, 5);
  }
  std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
  data::ShardIterator shard(&examples, 0, 2, job.batch_size, job.seed);
  ASSERT_OK_AND_ASSIGN(TrainerResult second, RunTrainer(Options(job, 0, 2), &shard, store.get()));
  EXPECT_EQ(second.steps, 11);
  EXPECT_EQ(cluster.GlobalStep(), 32);
  EXPECT_THAT(store->ReplicaPushes(0), ::testing::Eq(absl::StatusOr<int64_t>(16)));
}


TEST(TrainerTest, AStopEndsTheScheduleBeforeTheNextStepAndSaysWhoStoppedIt) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 1, 1);
  std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
  StopAt stop(5);
  TrainerOptions options = Options(job, 0, 1);
  options.exact = true;
  options.observer = &stop;
  data::ShardIterator shard(&examples, 0, 1, job.batch_size, job.seed);
  ASSERT_OK_AND_ASSIGN(TrainerResult trained, RunTrainer(options, &shard, store.get()));
  EXPECT_EQ(trained.stopped_by, 15);
  EXPECT_EQ(trained.steps, 5);
  EXPECT_EQ(cluster.GlobalStep(), 5);
}

TEST(TrainerTest, AStartAtTheCallersStepSkipsTheStepsBefore) {
  const data::Dataset examples = Examples();
  const model::JobSpec job = Job("async", 32);
  Cluster cluster(job, 1, 1);
  std::unique_ptr<client::InProcessStore> store = cluster.Store(0, "async");
  TrainerOptions options = Options(job, 0, 1);
  options.exact = true;
  options.start_at = 20;
  data::ShardIterator shard(&examples, 0, 1, job.batch_size, job.seed);
  ASSERT_OK_AND_ASSIGN(TrainerResult trained, RunTrainer(options, &shard, store.get()));
  EXPECT_EQ(trained.steps, 12);
  EXPECT_EQ(cluster.GlobalStep(), 12);
}

}  // namespace
}  // namespace pstrain::train
