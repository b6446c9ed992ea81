// train --local's checkpoints: what is saved is what comes back (values,
// dense slots, table rows with their slots and update counts), in the files
// and index a cluster's checkpoint has; one of another optimizer or shape is
// refused with nothing changed.
#include "train/local_checkpoint.h"

#include <filesystem>

#include "checkpoint/checkpoint_shard.h"
#include "common/checkpoint_layout.h"
#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::train {
namespace {

using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  const std::string dir = pstrain::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A model of two dense variables and one embedding table, its values and
// slots filled from `fill`, for `optimizer`.
struct Model {
  std::vector<VariableDef> variables;
  std::vector<float> params;
  std::vector<std::vector<float>> slots;
  std::unique_ptr<LocalTables> tables;
  LocalModelState state;
};

std::unique_ptr<Model> MakeModel(const std::string& optimizer, int kernel_rows, float fill) {
  auto m = std::make_unique<Model>();
  m->variables = {{"kernel", {kernel_rows, 3}}, {"bias", {3}}, {"emb", {1000, 4}, true}};
  OptimizerSpec spec;
  spec.name = optimizer;
  auto opt = optim::CreateOptimizer(spec);
  EXPECT_OK(opt);
  const int64_t n = kernel_rows * 3 + 3;
  m->params.resize(n);
  for (int64_t i = 0; i < n; ++i) m->params[i] = fill + 0.001f * i;
  m->slots.assign((*opt)->num_slots(), std::vector<float>(n));
  for (size_t k = 0; k < m->slots.size(); ++k) {
    for (int64_t i = 0; i < n; ++i) m->slots[k][i] = fill * (k + 2) - 0.002f * i;
  }
  auto tables = LocalTables::Create(m->variables, 7, &spec);
  EXPECT_OK(tables);
  m->tables = std::make_unique<LocalTables>(*std::move(tables));
  auto placement = ComputePlacement(m->variables, 1);
  EXPECT_OK(placement);
  m->state.placement = *placement;
  m->state.offsets = {0, kernel_rows * 3, 0};
  m->state.optimizer = optimizer;
  m->state.params = &m->params;
  m->state.slots = &m->slots;
  m->state.tables = m->tables.get();
  return m;
}

void PushRows(LocalTable& table, std::vector<int64_t> ids, float g) {
  std::vector<float> grads(ids.size() * table.dim(), g);
  ASSERT_OK(table.Apply(ids, grads.data()));
}

TEST(LocalCheckpointTest, WhatIsSavedComesBackWithSlotsAndRowCounts) {
  const std::string dir = Dir("local_ckpt");
  auto a = MakeModel("adam", 2000, 0.5f);
  LocalTable& table = (*a->tables)[0];
  PushRows(table, {3, 999, 42}, 0.25f);
  PushRows(table, {42}, -1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 17, a->state, 5, /*final=*/false));
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

  auto b = MakeModel("adam", 2000, -3.0f);
  ASSERT_OK_AND_ASSIGN(int64_t step, RestoreLocalCheckpoint(dir, b->state));
  EXPECT_EQ(step, 17);
  EXPECT_EQ(b->params, a->params);
  EXPECT_EQ(b->slots, a->slots);
  const LocalTable::StoredRows want = table.Stored();
  const LocalTable::StoredRows got = (*b->tables)[0].Stored();
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(std::vector<float>(got.data.begin(), got.data.end()),
            std::vector<float>(want.data.begin(), want.data.end()));
  EXPECT_EQ(std::vector<int64_t>(got.updates.begin(), got.updates.end()),
            (std::vector<int64_t>{1, 1, 2}));
  // Row 42's second update counts as its second (lazy Adam's t) after the
  // restore, as before it.
  PushRows(table, {42}, 0.5f);
  PushRows((*b->tables)[0], {42}, 0.5f);
  std::vector<float> ra(4), rb(4);
  const int64_t id = 42;
  ASSERT_OK(table.Read({&id, 1}, ra.data()));
  ASSERT_OK((*b->tables)[0].Read({&id, 1}, rb.data()));
  EXPECT_EQ(ra, rb);
}

TEST(LocalCheckpointTest, KeepsTheNewestAndMarksTheFinal) {
  const std::string dir = Dir("local_ckpt_keep");
  auto a = MakeModel("sgd", 10, 1.0f);
  for (int64_t step : {10, 20, 30, 40}) {
    ASSERT_OK(SaveLocalCheckpoint(dir, step, a->state, 2, step == 40));
  }
  EXPECT_EQ(ListCheckpointSteps(dir), (std::vector<int64_t>{30, 40}));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, 40);
  EXPECT_TRUE(index.final);
}

TEST(LocalCheckpointTest, NothingToRestoreIsStepZero) {
  const std::string dir = Dir("local_ckpt_none");
  auto a = MakeModel("sgd", 10, 1.0f);
  const std::vector<float> before = a->params;
  ASSERT_OK_AND_ASSIGN(int64_t step, RestoreLocalCheckpoint(dir + "/absent", a->state));
  EXPECT_EQ(step, 0);
  EXPECT_EQ(a->params, before);
}

TEST(LocalCheckpointTest, AnotherOptimizerOrShapeIsRefusedAndNothingChanges) {
  const std::string dir = Dir("local_ckpt_other");
  auto adam = MakeModel("adam", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, adam->state, 5, false));
  auto sgd = MakeModel("sgd", 10, 2.0f);
  const std::vector<float> before = sgd->params;
  absl::StatusOr<int64_t> r = RestoreLocalCheckpoint(dir, sgd->state);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("was written with adam (2 optimizer slots); this "
                                              "run uses sgd (0)"));
  EXPECT_EQ(sgd->params, before);
  auto wider = MakeModel("adam", 12, 2.0f);
  const std::vector<float> wider_before = wider->params;
  r = RestoreLocalCheckpoint(dir, wider->state);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("kernel"));
  EXPECT_EQ(wider->params, wider_before);
  // The checkpoint is as it was.
  EXPECT_EQ(ListCheckpointSteps(dir), (std::vector<int64_t>{5}));
}

TEST(LocalCheckpointTest, ADamagedShardIsDataLossNamingTheFile) {
  const std::string dir = Dir("local_ckpt_damaged");
  auto a = MakeModel("sgd", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, a->state, 5, false));
  const std::string path = ShardPath(dir, 5, 0, 1);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_OK(WriteFileAtomically(path, bytes));
  absl::StatusOr<int64_t> r = RestoreLocalCheckpoint(dir, a->state);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(path));
}

TEST(LocalCheckpointTest, ASaveThatCannotBeWrittenLeavesNoDirectory) {
  const std::string dir = Dir("local_ckpt_fail");
  auto a = MakeModel("sgd", 10, 1.0f);
  ASSERT_OK(SaveLocalCheckpoint(dir, 5, a->state, 5, false));
  // ckpt-9 cannot be made: a file stands where the MANIFEST goes.
  std::filesystem::create_directories(ManifestPath(dir, 9));
  std::filesystem::create_directories(CheckpointDir(dir, 9) + "/keep");
  absl::Status s = SaveLocalCheckpoint(dir, 9, a->state, 5, false);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("MANIFEST"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointDir(dir, 9)));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, 5);
}

}  // namespace
}  // namespace pstrain::train
