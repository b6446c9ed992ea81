// A correctness test of sync aggregation, end to end on the real data: two
// workers in sync mode with batch 32 each, through real PS servers on
// loopback, end with the parameters of a local run with batch 64 fed the
// same examples in the same order, to float rounding. The data sharding
// (data/dataset.h) makes the k-th batches of the two workers together the
// k-th batch of 64; the PS averages the two mean gradients; the local run
// takes the mean over 64; both apply the same Adam code. With an embedding
// table, the PS sums the two replicas' row gradients per step and applies
// them once per row, as the local run's table does.
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/remote_store.h"
#include "base/file_util.h"
#include "cluster/placement.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/dataset.h"
#include "data/input.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"
#include "ps_server/testing/local_ps.h"
#include "tests/testing/keyword_texts.h"
#include "train/local_trainer.h"
#include "train/trainer.h"

namespace pstrain {
namespace {

constexpr int kSteps = 60;

// Trains `job` (batch 32 per replica) on two sync replicas through two real
// PS, and locally with batch 64, and checks that the dense parameters and
// every embedding row the batches touched end the same to float rounding,
// after `steps` steps that move some parameter by more than `min_moved`.
void ExpectSyncEqualsLocal(model::JobSpec job, bool shared_memory, int steps, double min_moved,
                           double tolerance, int replicas = 2) {
  job.max_steps = steps;
  job.consistency = Consistency::Sync();
  job.model.sync_tables = true;
  model::JobSpec local_job = job;
  local_job.batch_size = 32 * replicas;
  ASSERT_OK_AND_ASSIGN(train::LocalResult local, train::RunLocal(local_job, 1000));
  ASSERT_EQ(local.steps, steps);

  ASSERT_OK_AND_ASSIGN(
      data::Dataset train,
      data::LoadInputSplit(job.data_dir, job.input, data::Split::kTrain, job.model.num_classes()));
  ASSERT_OK_AND_ASSIGN(auto net, model::Network::Create(job.model, 32 * replicas));
  ASSERT_OK_AND_ASSIGN(auto cluster, ps::testing::LocalPs::Start(2));
  ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement(net->variables(), 2));
  client::PsClientOptions observer;
  observer.ps_addresses = cluster->addresses();
  observer.replica = -1;
  ASSERT_OK_AND_ASSIGN(auto chief, client::PsClient::Create(observer, placement));
  client::CreateOptions create;
  create.optimizer = job.optimizer;
  create.consistency = Consistency::Sync();
  create.num_replicas = replicas;
  create.seed = job.seed;
  ASSERT_OK(
      client::PsAdmin(&chief->control()).CreateVariables(placement, net->InitialParameters(job.seed), net->offsets(), create).status());

  job.batch_size = 32;
  absl::Status results[2];
  int64_t shared_frames[2] = {0, 0};
  std::vector<std::thread> workers;
  for (int r = 0; r < replicas; ++r) {
    workers.emplace_back([&, r] {
      client::PsClientOptions options = observer;
      options.replica = r;
      options.consistency = Consistency::Sync();
      options.shared_memory = shared_memory;
      auto client = client::PsClient::Create(options, placement);
      if (!client.ok()) {
        results[r] = client.status();
        return;
      }
      train::TrainerOptions trainer;
      trainer.job = job;
      trainer.replica = r;
      trainer.num_replicas = replicas;
      trainer.log_every_steps = 1000;
      trainer.split_examples = train.num_examples;
      data::ShardIterator shard(&train, r, replicas, job.batch_size, job.seed);
      client::RemoteStore store(client->get(), net->offsets());
      results[r] = train::RunTrainer(trainer, &shard, &store).status();
      shared_frames[r] = (*client)->SharedMemoryFrames();
    });
  }
  for (std::thread& t : workers) t.join();
  for (int r = 0; r < replicas; ++r) ASSERT_OK(results[r]);
  for (int r = 0; r < replicas; ++r) {
    if (shared_memory) {
      // Every step's exchange with each PS, bar the first few sent before
      // the PS had mapped the region.
      EXPECT_GT(shared_frames[r], steps) << "replica " << r;
    } else {
      EXPECT_EQ(shared_frames[r], 0) << "replica " << r;
    }
  }

  std::vector<float> params(net->num_parameters());
  ASSERT_OK_AND_ASSIGN(int64_t step, chief->PullAll(params.data(), net->offsets()));
  EXPECT_EQ(step, steps);
  ASSERT_EQ(params.size(), local.params.size());
  const std::vector<float> initial = net->InitialParameters(job.seed);
  double max_diff = 0, max_moved = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double{params[i]} - local.params[i]));
    max_moved = std::max(max_moved, std::fabs(double{local.params[i]} - initial[i]));
  }
  // Adam moves a parameter by up to about lr = 1e-3 per step; the two runs
  // differ only by the rounding of summing 64 per-example gradients in two
  // halves, orders of magnitude below one step.
  std::printf(
      "after %d steps: parameters moved up to %.3g from their initial values; "
      "sync and local differ by at most %.3g\n",
      steps, max_moved, max_diff);
  EXPECT_GT(max_moved, min_moved);
  EXPECT_LT(max_diff, tolerance) << "largest parameter difference, sync vs local";

  // Each table's rows, every id of its vocabulary (rows never pushed read
  // their initial values on both sides).
  ASSERT_EQ(local.tables.size(), net->embeddings().size());
  for (int t = 0; t < local.tables.size(); ++t) {
    train::LocalTable& table = local.tables[t];
    std::vector<int64_t> ids(table.vocabulary());
    for (int64_t i = 0; i < table.vocabulary(); ++i) ids[i] = i;
    std::vector<float> from_ps(ids.size() * table.dim()), from_local(ids.size() * table.dim());
    ASSERT_OK(chief->PullRows(table.name(), ids, from_ps.data()));
    ASSERT_OK(table.Read(ids, from_local.data()));
    double row_diff = 0;
    for (size_t i = 0; i < from_ps.size(); ++i) {
      row_diff = std::max(row_diff, std::fabs(double{from_ps[i]} - from_local[i]));
    }
    std::printf("%s: %lld rows trained; sync and local differ by at most %.3g\n",
                table.name().c_str(), static_cast<long long>(table.rows()), row_diff);
    EXPECT_GT(table.rows(), 50) << table.name();
    EXPECT_LT(row_diff, tolerance) << table.name();
  }
}

// The model's config; whole-model pushes after each step, and pushes layer
// by layer as backprop produces each gradient; tensor bytes in the frames,
// and through shared memory.
class SyncMatchesLocalTest : public ::testing::TestWithParam<std::tuple<std::string, bool, bool>> {
};

TEST_P(SyncMatchesLocalTest, TwoSyncWorkersOfBatch32EqualOneLocalRunOfBatch64) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile(std::get<0>(GetParam())));
  model::JobSpec job = config.job;  // Adam 1e-3
  job.seed = 5;
  job.push_per_layer = std::get<1>(GetParam());
  if (std::get<0>(GetParam()).find("resnet") != std::string::npos) {
    // Its 16-channel convolutions' patches come in two chunks at batch 64
    // and one at 32, so their outputs differ in rounding, and a max pool
    // between near-equal values can pick another one: a gradient moved by
    // one example's share. So a short run at a small rate, whose bound
    // (1e-4) is still far below what a gradient not summed over a fan-out
    // or an add would be off by (the 5e-3 it moves).
    job.optimizer = OptimizerSpec{"sgd", 0.01f};
    ExpectSyncEqualsLocal(job, std::get<2>(GetParam()), 10, 0.005, 1e-4);
    return;
  }
  ExpectSyncEqualsLocal(job, std::get<2>(GetParam()), kSteps, 0.02, 2e-5);
}

// A learning-rate schedule reaches the PS with the optimizer (the chief's
// CreateVariables) and steps as train --local steps it: Adam's rate falling
// by half every 10 steps, then a piecewise SGD rate.
TEST(SyncMatchesLocalScheduleTest, ThePsStepsTheScheduleAsTheLocalRunDoes) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_mlp.pbtxt"));
  model::JobSpec job = config.job;  // Adam 1e-3
  job.seed = 5;
  job.max_steps = kSteps;
  job.batch_size = 64;
  ASSERT_OK_AND_ASSIGN(train::LocalResult constant, train::RunLocal(job, 1000));
  job.optimizer.schedule = "exponential_decay";
  job.optimizer.decay_steps = 10;
  job.optimizer.decay_rate = 0.5f;
  ASSERT_OK_AND_ASSIGN(train::LocalResult decayed, train::RunLocal(job, 1000));
  EXPECT_NE(constant.params, decayed.params);  // the schedule moves them less
  ExpectSyncEqualsLocal(job, /*shared_memory=*/false, kSteps, 0.002, 2e-5);
  job.optimizer.name = "sgd";
  job.optimizer.schedule = "piecewise_constant";
  job.optimizer.boundaries = {20, 40};
  job.optimizer.values = {0.1f, 0.05f, 0.01f};
  ExpectSyncEqualsLocal(job, /*shared_memory=*/true, kSteps, 0.002, 2e-5);
}

// The seeds' text CNN (embedding -> conv1d -> pool -> conv1d -> pool ->
// flatten -> dense) on a small corpus: its table's rows are spread over
// both PS and trained in sync rounds.
TEST(SyncMatchesLocalTextCnnTest, TwoSyncWorkersOfBatch32EqualOneLocalRunOfBatch64) {
  ASSERT_OK_AND_ASSIGN(const std::string corpus,
                       testing::WriteKeywordCorpus(testing::TempDir() + "/text_cnn"));
  const std::string input = absl::StrCat(testing::kKeywordCorpusInput, R"pb(
    layer { embedding { vocabulary: 502 dim: 7 ids_from: "feature:tokens" } }
    optimizer { name: "sgd" learning_rate: 0.1 }
    seed: 5
  )pb");
  // The seeds' stack, for 40 steps: later, a ReLU or a pool's maximum that
  // the two runs' roundings put on different sides for one example (one
  // gradient term changing discretely) parts them for good, as it would two
  // local runs that summed in another order.
  const std::string seeds = testing::kSeedsTextCnnLayers;
  // A stack without such branches, for 120 steps: past the epoch's end
  // (62 steps of 64), where the data is shuffled again.
  const std::string smooth = R"pb(
    layer { conv1d { filters: 64 kernel_size: 5 } }
    layer { global_average_pool1d {} }
    layer { dense { units: 4 } }
  )pb";
  for (const auto& [layers, steps, moved] :
       {std::make_tuple(seeds, 40, 0.01), std::make_tuple(smooth, 120, 0.005)}) {
    SCOPED_TRACE(layers);
    ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                         model::ParseModelConfigFile(input + layers, "text_cnn.pbtxt"));
    model::JobSpec job = config.job;
    job.data_dir = corpus;
    ExpectSyncEqualsLocal(job, /*shared_memory=*/true, steps, moved, 2e-5);
  }
}

// Batch normalization (configs/fashion_mnist_mobile.pbtxt): its moving
// statistics' increments go to the PS with the gradients and are added
// there once, no optimizer slots beside them. One sync replica of batch 32
// against a local run of batch 32: two replicas normalise by their own
// halves of the batch, as TensorFlow's replicas do, so they do not step as
// one batch of 64 would.
TEST(SyncMatchesLocalBatchNormTest, OneSyncReplicaEqualsALocalRunOfItsBatch) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_mobile.pbtxt"));
  model::JobSpec job = config.job;  // Adam 1e-3
  job.seed = 5;
  for (bool per_layer : {false, true}) {
    SCOPED_TRACE(per_layer ? "per layer" : "whole model");
    job.push_per_layer = per_layer;
    ExpectSyncEqualsLocal(job, /*shared_memory=*/per_layer, kSteps, 0.02, 2e-5, /*replicas=*/1);
  }
}

std::string CaseName(const ::testing::TestParamInfo<SyncMatchesLocalTest::ParamType>& info) {
  const std::string& config = std::get<0>(info.param);
  return std::string(config.find("resnet") != std::string::npos ? "ResNet"
                     : config.find("cnn") != std::string::npos  ? "Cnn"
                                                                : "Mlp") +
         (std::get<1>(info.param) ? "PerLayer" : "WholeModel") +
         (std::get<2>(info.param) ? "SharedMemory" : "InFrames");
}

// 784-256-256-10.
INSTANTIATE_TEST_SUITE_P(Mlp, SyncMatchesLocalTest,
                         ::testing::Combine(::testing::Values("configs/fashion_mnist_mlp.pbtxt"),
                                            ::testing::Bool(), ::testing::Bool()),
                         CaseName);
// Conv2D 32 3x3 -> MaxPool2D -> Flatten -> Dense 128 -> Dense 10.
INSTANTIATE_TEST_SUITE_P(Cnn, SyncMatchesLocalTest,
                         ::testing::Combine(::testing::Values("configs/fashion_mnist_cnn.pbtxt"),
                                            ::testing::Bool(), ::testing::Values(true)),
                         CaseName);
// A graph: a residual Add, a Concatenate of two branches, a layer's output
// read by two layers (configs/fashion_mnist_resnet.pbtxt).
INSTANTIATE_TEST_SUITE_P(ResNet, SyncMatchesLocalTest,
                         ::testing::Combine(::testing::Values("configs/fashion_mnist_resnet.pbtxt"),
                                            ::testing::Values(true), ::testing::Values(true)),
                         CaseName);

}  // namespace
}  // namespace pstrain
