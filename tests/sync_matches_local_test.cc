// A correctness test of sync aggregation, end to end on the real data: two
// workers in sync mode with batch 32 each, through real PS servers on
// loopback, end with the parameters of a local run with batch 64 fed the
// same examples in the same order, to float rounding. The data sharding
// (data/dataset.h) makes the k-th batches of the two workers together the
// k-th batch of 64; the PS averages the two mean gradients; the local run
// takes the mean over 64; both apply the same Adam code.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "client/ps_client.h"
#include "common/placement.h"
#include "common/testing/status_testing.h"
#include "data/dataset.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"
#include "ps_server/testing/local_ps.h"
#include "train/local_trainer.h"
#include "train/trainer.h"

namespace pstrain {
namespace {

constexpr int kSteps = 60;

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
  job.max_steps = kSteps;
  job.push_per_layer = std::get<1>(GetParam());
  const bool shared_memory = std::get<2>(GetParam());

  model::JobSpec local_job = job;
  local_job.batch_size = 64;
  ASSERT_OK_AND_ASSIGN(train::LocalResult local, train::RunLocal(local_job, 1000));
  ASSERT_EQ(local.steps, kSteps);

  ASSERT_OK_AND_ASSIGN(data::Dataset train,
                       data::LoadMnistFormat(job.data_dir, data::Split::kTrain));
  ASSERT_OK_AND_ASSIGN(auto mlp, model::Network::Create(job.model, 64));
  ASSERT_OK_AND_ASSIGN(auto cluster, ps::testing::LocalPs::Start(2));
  ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement(mlp->variables(), 2));
  client::PsClientOptions observer;
  observer.ps_addresses = cluster->addresses();
  observer.replica = -1;
  ASSERT_OK_AND_ASSIGN(auto chief, client::PsClient::Create(observer, placement));
  client::CreateOptions create;
  create.optimizer = job.optimizer;
  create.consistency = "sync";
  create.num_replicas = 2;
  create.seed = job.seed;
  ASSERT_OK(
      chief->CreateVariables(mlp->InitialParameters(job.seed), mlp->offsets(), create).status());

  job.batch_size = 32;
  job.consistency = "sync";
  absl::Status results[2];
  int64_t shared_frames[2] = {0, 0};
  std::vector<std::thread> workers;
  for (int r = 0; r < 2; ++r) {
    workers.emplace_back([&, r] {
      client::PsClientOptions options = observer;
      options.replica = r;
      options.consistency = "sync";
      options.shared_memory = shared_memory;
      auto client = client::PsClient::Create(options, placement);
      if (!client.ok()) {
        results[r] = client.status();
        return;
      }
      train::TrainerOptions trainer;
      trainer.job = job;
      trainer.replica = r;
      trainer.num_replicas = 2;
      trainer.log_every_steps = 1000;
      trainer.split_examples = train.num_examples;
      data::ShardIterator shard(&train, r, 2, job.batch_size, job.seed);
      results[r] = train::RunTrainer(trainer, &shard, client->get()).status();
      shared_frames[r] = (*client)->SharedMemoryFrames();
    });
  }
  for (std::thread& t : workers) t.join();
  ASSERT_OK(results[0]);
  ASSERT_OK(results[1]);
  for (int r = 0; r < 2; ++r) {
    if (shared_memory) {
      // Every step's exchange with each PS, bar the first few sent before
      // the PS had mapped the region.
      EXPECT_GT(shared_frames[r], kSteps) << "replica " << r;
    } else {
      EXPECT_EQ(shared_frames[r], 0) << "replica " << r;
    }
  }

  std::vector<float> params(mlp->num_parameters());
  ASSERT_OK_AND_ASSIGN(int64_t step, chief->PullAll(params.data(), mlp->offsets()));
  EXPECT_EQ(step, kSteps);
  ASSERT_EQ(params.size(), local.params.size());
  const std::vector<float> initial = mlp->InitialParameters(job.seed);
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
      kSteps, max_moved, max_diff);
  EXPECT_GT(max_moved, 0.02);
  EXPECT_LT(max_diff, 2e-5) << "largest parameter difference, sync vs local";
}

std::string CaseName(const ::testing::TestParamInfo<SyncMatchesLocalTest::ParamType>& info) {
  const std::string& config = std::get<0>(info.param);
  return std::string(config.find("cnn") != std::string::npos ? "Cnn" : "Mlp") +
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

}  // namespace
}  // namespace pstrain
