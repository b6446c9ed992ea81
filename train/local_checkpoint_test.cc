// train --local's checkpoints: what is saved is what comes back (values,
// dense slots, table rows with their slots and update counts), in the files
// and index a cluster's checkpoint has; one of another optimizer or shape is
// refused with nothing changed.
#include "train/local_checkpoint.h"

#include <filesystem>

#include "checkpoint/checkpoint_shard.h"
#include "client/create_request.h"
#include "client/in_process_store.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/ps_control.h"

namespace pstrain::train {
namespace {

using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  const std::string dir = pstrain::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A one-PS store of two dense variables and one embedding table, its values
// filled from `fill`, for `optimizer`, and a replica's way to it.
struct Model {
  Placement placement;
  std::vector<int64_t> offsets;
  std::shared_ptr<ps::ShardStore> store;
  std::unique_ptr<client::InProcessStore> replica;

  // Pushes gradient `g` for every value and for the rows `ids`.
  void Push(float g, std::vector<int64_t> ids) {
    std::vector<float> grads(offsets.back(), g);
    ASSERT_OK(replica->PushAll(grads.data()));
    std::vector<float> rows(ids.size() * 4, g);
    const client::TableRows push[] = {{"emb", ids, nullptr, rows.data()}};
    ASSERT_OK(replica->PushRows(push));
  }
  // Every tensor's records as a checkpoint holds them.
  std::vector<std::string> Records() const {
    auto shard = store->Snapshot(0);
    EXPECT_OK(shard);
    std::vector<std::string> out;
    for (const v1::TensorCheckpoint& t : shard->tensors) out.push_back(t.SerializeAsString());
    return out;
  }
};

std::unique_ptr<Model> MakeModel(const std::string& optimizer, int kernel_rows, float fill) {
  auto m = std::make_unique<Model>();
  const std::vector<VariableDef> variables = {
      {"kernel", {kernel_rows, 3}}, {"bias", {3}}, {"emb", {1000, 4}, true}};
  auto placement = ComputePlacement(variables, 1);
  EXPECT_OK(placement);
  m->placement = *placement;
  const int64_t n = kernel_rows * 3 + 3;
  m->offsets = {0, kernel_rows * 3, n};
  std::vector<float> params(n);
  for (int64_t i = 0; i < n; ++i) params[i] = fill + 0.001f * i;
  client::CreateOptions create;
  create.optimizer.name = optimizer;
  create.optimizer.learning_rate = 0.01f;
  create.seed = 7;
  m->store = std::make_shared<ps::ShardStore>(0, 1);
  ps::PsControl control(m->store.get());
  EXPECT_OK(control.CreateVariables(
      client::CreateRequestFor(m->placement, 0, params, m->offsets, create)));
  auto replica = client::InProcessStore::Create({m->store}, m->placement, m->offsets, {});
  EXPECT_OK(replica);
  m->replica = *std::move(replica);
  EXPECT_OK(m->replica->WaitUntilReady(absl::ZeroDuration()));
  return m;
}

TEST(LocalCheckpointTest, WhatIsSavedComesBackWithSlotsAndRowCounts) {
  const std::string dir = Dir("local_ckpt");
  auto a = MakeModel("adam", 2000, 0.5f);
  a->Push(0.25f, {3, 999, 42});
  a->Push(-1.0f, {42});
  ASSERT_OK(SaveLocalCheckpoint(dir, 17, *a->store, 5, /*final=*/false));
  // The cluster's layout: a shard, its MANIFEST, the index.
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, 17);
  EXPECT_FALSE(index.final);
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(dir, nullptr);
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(complete[0].num_ps, 1);
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents shard, ckpt::ReadShard(ShardPath(dir, 17, 0, 1)));
  EXPECT_EQ(shard.header.optimizer(), "adam");
  EXPECT_EQ(shard.header.num_slots(), 2);
  EXPECT_EQ(shard.header.step(), 17);
  for (const v1::TensorCheckpoint& t : shard.tensors) {
    if (t.key() == "emb") {
      EXPECT_EQ(std::vector<int64_t>(t.row_updates().begin(), t.row_updates().end()),
                (std::vector<int64_t>{1, 1, 2}));
    }
  }

  auto b = MakeModel("adam", 2000, -3.0f);
  ASSERT_OK_AND_ASSIGN(int64_t step, RestoreLocalCheckpoint(dir, b->store.get()));
  EXPECT_EQ(step, 17);
  EXPECT_EQ(b->Records(), a->Records());
  // Row 42's next update counts as its third (lazy Adam's t) after the
  // restore, as before it; the dense ones as their third.
  a->Push(0.5f, {42});
  b->Push(0.5f, {42});
  EXPECT_EQ(b->Records(), a->Records());
}

TEST(LocalCheckpointTest, KeepsTheNewestAndMarksTheFinal) {
  const std::string dir = Dir("local_ckpt_keep");
  auto a = MakeModel("sgd", 10, 1.0f);
  for (int64_t step : {10, 20, 30, 40}) {
    ASSERT_OK(SaveLocalCheckpoint(dir, step, *a->store, 2, step == 40));
  }
  EXPECT_EQ(ListCheckpointSteps(dir), (std::vector<int64_t>{30, 40}));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, 40);
  EXPECT_TRUE(index.final);
}

TEST(LocalCheckpointTest, NothingToRestoreIsStepZero) {
  const std::string dir = Dir("local_ckpt_none");
  auto a = MakeModel("sgd", 10, 1.0f);
  const std::vector<std::string> before = a->Records();
  ASSERT_OK_AND_ASSIGN(int64_t step, RestoreLocalCheckpoint(dir + "/absent", a->store.get()));
  EXPECT_EQ(step, 0);
  EXPECT_EQ(a->Records(), before);
}

TEST(LocalCheckpointTest, AnotherOptimizerOrShapeIsRefusedAndNothingChanges) {
  const std::string dir = Dir("local_ckpt_other");
  auto adam = MakeModel("adam", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, *adam->store, 5, false));
  auto sgd = MakeModel("sgd", 10, 2.0f);
  const std::vector<std::string> before = sgd->Records();
  absl::StatusOr<int64_t> r = RestoreLocalCheckpoint(dir, sgd->store.get());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("was written with adam (2 optimizer slots); this "
                                              "run uses sgd (0)"));
  EXPECT_EQ(sgd->Records(), before);
  auto wider = MakeModel("adam", 12, 2.0f);
  const std::vector<std::string> wider_before = wider->Records();
  r = RestoreLocalCheckpoint(dir, wider->store.get());
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("kernel"));
  EXPECT_EQ(wider->Records(), wider_before);
  // The checkpoint is as it was.
  EXPECT_EQ(ListCheckpointSteps(dir), (std::vector<int64_t>{5}));
}

TEST(LocalCheckpointTest, ADamagedShardIsDataLossNamingTheFile) {
  const std::string dir = Dir("local_ckpt_damaged");
  auto a = MakeModel("sgd", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, *a->store, 5, false));
  const std::string path = ShardPath(dir, 5, 0, 1);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_OK(WriteFileAtomically(path, bytes));
  absl::StatusOr<int64_t> r = RestoreLocalCheckpoint(dir, a->store.get());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(path));
}

TEST(LocalCheckpointTest, ASaveThatCannotBeWrittenLeavesNoDirectory) {
  const std::string dir = Dir("local_ckpt_fail");
  auto a = MakeModel("sgd", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, *a->store, 5, false));
  // ckpt-9 cannot be made: a file stands where the MANIFEST goes.
  std::filesystem::create_directories(ManifestPath(dir, 9));
  std::filesystem::create_directories(CheckpointDir(dir, 9) + "/keep");
  absl::Status s = SaveLocalCheckpoint(dir, 9, *a->store, 5, false);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("MANIFEST"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointDir(dir, 9)));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, 5);
}

}  // namespace
}  // namespace pstrain::train
