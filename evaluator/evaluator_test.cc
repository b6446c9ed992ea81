#include "evaluator/evaluator.h"

#include <string>
#include <vector>

#include "common/checkpoint_layout.h"
#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "ps_server/checkpoint_shard.h"
#include "ps_server/shard_store.h"

namespace pstrain::evaluator {
namespace {

// Two PS stores holding a model split by placement, checkpointed to files;
// the evaluator's loader puts the values back in the flat layout.
class LoadCheckpointParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vars_ = {{"big", {300, 100}}, {"small", {7}}};
    PlacementOptions po;
    po.min_slice_bytes = 16 * 1024;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement(vars_, 2, po));
    ASSERT_EQ(placement_.SlicesOf("big").size(), 2u);
    offsets_ = {0, 300 * 100};
    total_ = 300 * 100 + 7;
    params_.resize(total_);
    for (int64_t i = 0; i < total_; ++i) params_[i] = 0.001f * i - 3;
    dir_ = pstrain::testing::TempDir() + "/eval_load";
    for (int ps = 0; ps < 2; ++ps) {
      ps::ShardStore store(ps, 2);
      std::vector<ps::ShardStore::DenseInit> dense;
      std::vector<std::string> bytes;
      for (const SliceDef& s : placement_.SlicesOn(ps)) {
        const int v = s.variable == "big" ? 0 : 1;
        bytes.emplace_back(reinterpret_cast<const char*>(params_.data() + offsets_[v] +
                                                         s.element_offset()),
                           s.bytes());
      }
      size_t k = 0;
      for (const SliceDef& s : placement_.SlicesOn(ps)) {
        ps::ShardStore::DenseInit d;
        d.def = s;
        d.has_value = true;
        d.value = bytes[k++];
        dense.push_back(d);
      }
      ps::ShardStore::JobConfig job;
      job.optimizer = {"adam", 0.01f};
      ASSERT_OK(store.Initialize(job, dense, {}).status());
      ASSERT_OK_AND_ASSIGN(ps::ShardContents snap, store.Snapshot(9));
      ASSERT_OK(ps::WriteShard(ShardPath(dir_, 9, ps, 2), snap).status());
    }
  }

  std::vector<VariableDef> vars_;
  Placement placement_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
  std::vector<float> params_;
  std::string dir_;
};

TEST_F(LoadCheckpointParamsTest, ReassemblesTheFlatParameters) {
  ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                       LoadCheckpointParams(dir_, 9, placement_, offsets_, total_));
  EXPECT_EQ(got, params_);
}

TEST_F(LoadCheckpointParamsTest, MissingOrDamagedShardsAreNamed) {
  const std::string shard = ShardPath(dir_, 9, 1, 2);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(shard));
  bytes[bytes.size() / 2] ^= 0x04;
  ASSERT_OK(WriteFileAtomically(shard, bytes));
  auto bad = LoadCheckpointParams(dir_, 9, placement_, offsets_, total_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("checkpoint shard " + shard), absl::string_view::npos)
      << bad.status().message();
  auto missing = LoadCheckpointParams(dir_, 10, placement_, offsets_, total_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain::evaluator
