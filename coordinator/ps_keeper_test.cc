// The chief's keeper of the PS, against PS in the test's process and real
// checkpoint files: what a start finds decides between carrying on,
// restoring and creating; checkpoints cut every PS at one step; a restore
// after a PS came back empty rolls every PS back under a new generation and
// counts what it rolled back; a damaged checkpoint is set aside for the
// one before it.
#include "coordinator/ps_keeper.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include "cluster/checkpoint_layout.h"
#include "absl/strings/match.h"
#include "base/env.h"
#include "base/file_util.h"
#include "base/testing/fake_clock.h"
#include "coordinator/testing/in_process_job.h"
#include "absl/strings/str_cat.h"
#include "model/network.h"
#include "gmock/gmock.h"

namespace pstrain::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::InProcessJob;

TEST(PsKeeperTest, FreshPsGetTheVariablesAndTheCheckpointOfStepZero) {
  InProcessJob job("keeper_fresh", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK_AND_ASSIGN(int64_t generation, keeper.TakeOver());
  EXPECT_EQ(generation, 1);
  EXPECT_EQ(ReadFile(job.dir() + "/generation").value_or(""), "1\n");
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(job.dir(), nullptr);
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(complete[0].step, 0);
  EXPECT_EQ(complete[0].num_ps, 2);
  EXPECT_EQ(keeper.last_checkpoint(), 0);
  EXPECT_EQ(job.Values(), job.KeeperOptions().initial_values());
}

// The chief sends no values: each PS draws its slices of a model from the
// job's initial stream, and together they hold exactly what the model
// draws whole (what train --local and a chief's own replica start from).
TEST(PsKeeperTest, EachPsDrawsItsSlicesOfTheModelAsTheModelDrawsThemWhole) {
  model::NetworkSpec spec = model::NetworkSpec::FromWidths(784, {300, 100}, 10);
  spec.layers[1].bias_initializer = "uniform:0.5";  // a bias that draws too
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<model::Network> net, model::Network::Create(spec, 1));
  for (int num_ps : {1, 3}) {
    ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement(net->variables(), num_ps));
    if (num_ps == 3) {
      // The first kernel is split, its slices on several PS.
      ASSERT_GT(placement.SlicesOf("dense_0/kernel").size(), 1u);
    }
    client::InProcessCluster cluster(num_ps);
    client::PsAdmin admin(&cluster);
    PsKeeperOptions o;
    o.output_dir = pstrain::testing::FreshTempDir(absl::StrCat("keeper_model_", num_ps));
    o.placement = placement;
    o.offsets = net->offsets();
    o.create.optimizer = {"sgd", 0.1f};
    o.create.num_replicas = 1;
    o.create.seed = 11;
    PsKeeper keeper(&admin, std::move(o));
    ASSERT_OK(keeper.TakeOver().status());
    client::InProcessOptions observer;
    observer.replica = -1;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::InProcessStore> store,
                         cluster.Store(placement, net->offsets(), observer));
    std::vector<float> held(net->num_parameters());
    ASSERT_OK(store->PullAll(held.data()).status());
    EXPECT_EQ(held, net->InitialParameters(11)) << num_ps << " PS";
  }
}

TEST(PsKeeperTest, PsServingVariablesAreCarriedOnWithNothingRestored) {
  InProcessJob job("keeper_carry_on", 2);
  {
    PsKeeper first(&job.admin(), job.KeeperOptions());
    ASSERT_OK(first.TakeOver().status());
  }
  job.Push(0, 0.25f, 3);
  const std::vector<float> trained = job.Values();
  // A chief started again finds the PS as they are: nothing changes.
  PsKeeper second(&job.admin(), job.KeeperOptions());
  ASSERT_OK_AND_ASSIGN(int64_t generation, second.TakeOver());
  EXPECT_EQ(generation, 1);
  EXPECT_EQ(job.Values(), trained);
  EXPECT_EQ(second.last_checkpoint(), 0);
}

TEST(PsKeeperTest, EmptyPsAreRestoredFromTheNewestCheckpointUnderANewGeneration) {
  InProcessJob job("keeper_restore", 2);
  {
    PsKeeper first(&job.admin(), job.KeeperOptions());
    ASSERT_OK(first.TakeOver().status());
    job.Push(0, 0.25f, 4);
    ASSERT_OK(first.CheckpointNow());
    EXPECT_EQ(first.last_checkpoint(), 4);
  }
  const std::vector<float> at_four = job.Values();
  job.Push(1, 1.0f, 2);
  // The whole job relaunched: every PS empty.
  for (int ps = 0; ps < 2; ++ps) job.cluster().Start(ps);
  PsKeeper second(&job.admin(), job.KeeperOptions());
  ASSERT_OK_AND_ASSIGN(int64_t generation, second.TakeOver());
  EXPECT_EQ(generation, 2);
  EXPECT_EQ(second.last_checkpoint(), 4);
  EXPECT_EQ(job.Values(), at_four);
  ASSERT_OK_AND_ASSIGN(v1::HealthResponse h, job.admin().Health(1, absl::Seconds(1)));
  EXPECT_EQ(h.generation(), 2);
  EXPECT_EQ(h.restored_step(), 4);
  // Each replica's pushes are where the checkpoint has them.
  ASSERT_OK_AND_ASSIGN(int64_t pushes, job.admin().ReplicaPushes(job.placement(), 0));
  EXPECT_EQ(pushes, 4);
}

TEST(PsKeeperTest, ACheckpointCutsEveryPsAtOneStepAndASavedStepIsNotSavedAgain) {
  InProcessJob job("keeper_cut", 3);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK(keeper.TakeOver().status());
  job.Push(0, 0.5f, 7);
  ASSERT_OK(keeper.CheckpointNow());
  EXPECT_EQ(ListCheckpointSteps(job.dir()), (std::vector<int64_t>{0, 7}));
  ASSERT_OK(keeper.CheckpointNow());  // step 7 again: nothing new
  EXPECT_EQ(ListCheckpointSteps(job.dir()), (std::vector<int64_t>{0, 7}));
  ASSERT_OK(keeper.CheckpointNow(/*final=*/true));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(job.dir()));
  EXPECT_EQ(index.step, 7);
  EXPECT_TRUE(index.final);
  // The holds were released: pushes go on.
  job.Push(1, 0.5f);
}

TEST(PsKeeperTest, RestoreAllRollsEveryPsBackAndCountsTheStepsRolledBack) {
  InProcessJob job("keeper_restore_all", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK(keeper.TakeOver().status());
  job.Push(0, 0.25f, 4);
  ASSERT_OK(keeper.CheckpointNow());
  const std::vector<float> at_four = job.Values();
  job.Push(0, 0.25f, 6);
  keeper.SeeStep(7);  // the heartbeat's sample lags: ps:0's count says 10
  // ps:1 restarted: the other is rolled back with it.
  job.cluster().Start(1);
  ASSERT_OK_AND_ASSIGN(int64_t step, keeper.RestoreAll({1}));
  EXPECT_EQ(step, 4);
  EXPECT_EQ(keeper.generation(), 2);
  EXPECT_EQ(keeper.rolled_back(), 6);
  EXPECT_EQ(job.Values(), at_four);
  ASSERT_OK_AND_ASSIGN(int64_t global, job.admin().GlobalStep());
  EXPECT_EQ(global, 4);
}

TEST(PsKeeperTest, ADamagedNewestCheckpointIsSetAsideAndTheOneBeforeRestored) {
  InProcessJob job("keeper_damaged", 2);
  {
    PsKeeper first(&job.admin(), job.KeeperOptions());
    ASSERT_OK(first.TakeOver().status());
    job.Push(0, 0.25f, 3);
    ASSERT_OK(first.CheckpointNow());
  }
  const std::vector<float> at_three = job.Values();
  job.Push(0, 0.25f, 2);
  {
    PsKeeper again(&job.admin(), job.KeeperOptions());
    ASSERT_OK(again.CheckpointNow());
  }
  const std::string shard = ShardPath(job.dir(), 5, 1, 2);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(shard));
  bytes[bytes.size() / 2] ^= 0x10;
  ASSERT_OK(WriteFileAtomically(shard, bytes));
  for (int ps = 0; ps < 2; ++ps) job.cluster().Start(ps);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK(keeper.TakeOver().status());
  EXPECT_EQ(keeper.last_checkpoint(), 3);
  EXPECT_EQ(job.Values(), at_three);
  EXPECT_TRUE(std::filesystem::exists(CheckpointDir(job.dir(), 5) + ".corrupt"));
}

TEST(PsKeeperTest, ACheckpointOfAnotherModelIsRefusedWithNothingChanged) {
  InProcessJob job("keeper_other_model", 1);
  {
    PsKeeper first(&job.admin(), job.KeeperOptions());
    ASSERT_OK(first.TakeOver().status());
  }
  job.cluster().Start(0);
  PsKeeperOptions other = job.KeeperOptions();
  other.create.optimizer = {"adam", 0.001f};
  PsKeeper keeper(&job.admin(), other);
  absl::Status s = keeper.TakeOver().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("does not fit this job"));
  EXPECT_EQ(ListCheckpointSteps(job.dir()), (std::vector<int64_t>{0}));
}

// Storage that hiccups: the first `failures` opens of checkpoint shards
// for reading fail with an I/O error (Internal), not a failed check.
class FlakyReads final : public EnvWrapper {
 public:
  explicit FlakyReads(int failures) : EnvWrapper(Env::Default()), left_(failures) {}
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    if (absl::StrContains(path, "/shard-") && left_.fetch_sub(1) > 0) {
      return absl::InternalError(absl::StrCat("cannot read ", path, ": Input/output error"));
    }
    return target()->NewSequentialFile(path);
  }

 private:
  std::atomic<int> left_;
};

TEST(PsKeeperTest, ARestoreWhoseReadsFailIsTriedAgainAndTheCheckpointKept) {
  FlakyReads flaky(2);
  pstrain::testing::FakeClock clock;
  InProcessJob job("keeper_flaky_reads", 1, 2, "async", {&flaky});
  {
    PsKeeper first(&job.admin(), job.KeeperOptions());
    ASSERT_OK(first.TakeOver().status());
    job.Push(0, 0.25f, 3);
    ASSERT_OK(first.CheckpointNow());
  }
  const std::vector<float> at_three = job.Values();
  job.cluster().Start(0);
  PsKeeperOptions options = job.KeeperOptions();
  options.restore_tries = 3;
  options.clock = &clock;
  PsKeeper keeper(&job.admin(), options);
  absl::StatusOr<int64_t> generation;
  std::thread take_over([&] { generation = keeper.TakeOver(); });
  // Two failed reads, each followed by a wait on the clock: 1 s, then 2 s.
  for (int wait = 1; wait <= 2; ++wait) {
    ASSERT_TRUE(clock.AwaitWaitsBegun(wait)) << "wait " << wait;
    clock.Advance(absl::Seconds(wait));
  }
  take_over.join();
  ASSERT_OK(generation);
  EXPECT_EQ(keeper.last_checkpoint(), 3);
  EXPECT_EQ(job.Values(), at_three);
  EXPECT_FALSE(std::filesystem::exists(CheckpointDir(job.dir(), 3) + ".corrupt"));
}

}  // namespace
}  // namespace pstrain::coordinator
