#include "evaluator/evaluator.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "model/network.h"
#include "checkpoint/checkpoint_shard.h"
#include "store/shard_store.h"

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
      ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(9));
      ASSERT_OK(ckpt::WriteShard(ShardPath(dir_, 9, ps, 2), snap).status());
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

// Writes `params` of `net` as checkpoint `step` of `num_ps` PS under `dir`,
// shards then MANIFEST, as the PS and the chief do.
void WriteCheckpoint(const std::string& dir, int64_t step, int num_ps, const model::Network& net,
                     const std::vector<float>& params) {
  ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement(net.variables(), num_ps));
  std::string shards;
  for (int ps = 0; ps < num_ps; ++ps) {
    std::vector<ps::ShardStore::DenseInit> dense;
    for (const SliceDef& s : placement.SlicesOn(ps)) {
      int v = 0;
      while (net.variables()[v].name != s.variable) ++v;
      ps::ShardStore::DenseInit d;
      d.def = s;
      d.has_value = true;
      d.value = absl::string_view(
          reinterpret_cast<const char*>(params.data() + net.offsets()[v] + s.element_offset()),
          s.bytes());
      dense.push_back(d);
    }
    ps::ShardStore store(ps, num_ps);
    ps::ShardStore::JobConfig job;
    job.optimizer = {"sgd", 0.1f};
    ASSERT_OK(store.Initialize(job, dense, {}).status());
    ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(step));
    ASSERT_OK_AND_ASSIGN(ckpt::ShardWritten w,
                         ckpt::WriteShard(ShardPath(dir, step, ps, num_ps), snap));
    absl::StrAppend(&shards, ps > 0 ? "," : "", "{\"file\":\"shard-", ps, "-of-", num_ps,
                    "\",\"bytes\":", w.bytes, "}");
  }
  ASSERT_OK(WriteFileAtomically(ManifestPath(dir, step),
                                absl::StrCat("{\"step\":", step, ",\"shards\":[", shards, "]}\n")));
}

class RunEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.job.model = model::NetworkSpec::FromWidths(784, {16}, 10);
    options_.job.device = model::Device::Cpu();
    options_.poll = absl::Milliseconds(20);
    options_.idle_timeout = absl::Seconds(20);
    ASSERT_OK_AND_ASSIGN(net_, model::Network::Create(options_.job.model, 32));
    params_ = net_->InitialParameters(7);
  }

  void MarkFinal(int64_t step) {
    ASSERT_OK(WriteFileAtomically(CheckpointIndexPath(options_.output_dir),
                                  absl::StrCat("{\"final\":true,\"step\":", step, "}\n")));
  }

  void Damage(int64_t step, int ps, int num_ps) {
    const std::string shard = ShardPath(options_.output_dir, step, ps, num_ps);
    ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(shard));
    bytes[bytes.size() / 2] ^= 0x04;
    ASSERT_OK(WriteFileAtomically(shard, bytes));
  }

  EvaluatorOptions options_;
  std::unique_ptr<model::Network> net_;
  std::vector<float> params_;
};

// Every checkpoint is read as the PS that wrote it placed the variables,
// whatever the evaluator's own cluster says; damaged or incomplete ones
// are passed over (said in the log) instead of ending the evaluator.
TEST_F(RunEvaluatorTest, ScoresEachCheckpointAsWrittenAndPassesOverBrokenOnes) {
  options_.output_dir = pstrain::testing::TempDir() + "/eval_run";
  WriteCheckpoint(options_.output_dir, 10, 2, *net_, params_);  // written by 2 PS
  WriteCheckpoint(options_.output_dir, 20, 1, *net_, params_);
  Damage(20, 0, 1);
  WriteCheckpoint(options_.output_dir, 25, 1, *net_, params_);
  ASSERT_EQ(std::remove(ManifestPath(options_.output_dir, 25).c_str()), 0);
  WriteCheckpoint(options_.output_dir, 30, 1, *net_, params_);
  MarkFinal(30);
  ASSERT_OK_AND_ASSIGN(std::vector<Score> scores, RunEvaluator(options_));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].step, 10);
  EXPECT_EQ(scores[1].step, 30);
  // The same values, read from 2 shards and from 1: the same score.
  EXPECT_EQ(scores[0].accuracy, scores[1].accuracy);
  EXPECT_EQ(scores[0].loss, scores[1].loss);
  EXPECT_GT(scores[0].loss, 0);
  EXPECT_EQ(ReadScoredStep(options_.output_dir), 30);
}

TEST_F(RunEvaluatorTest, ADamagedFinalCheckpointIsAnError) {
  options_.output_dir = pstrain::testing::TempDir() + "/eval_final";
  WriteCheckpoint(options_.output_dir, 10, 1, *net_, params_);
  Damage(10, 0, 1);
  MarkFinal(10);
  auto damaged = RunEvaluator(options_);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find(ShardPath(options_.output_dir, 10, 0, 1)),
            absl::string_view::npos)
      << damaged.status().message();
  options_.output_dir = pstrain::testing::TempDir() + "/eval_final_incomplete";
  WriteCheckpoint(options_.output_dir, 10, 1, *net_, params_);
  ASSERT_EQ(std::remove(ShardPath(options_.output_dir, 10, 0, 1).c_str()), 0);
  MarkFinal(10);
  EXPECT_EQ(RunEvaluator(options_).status().message(),
            "evaluator: the job's final checkpoint, at step 10, cannot be scored (see above)");
}

}  // namespace
}  // namespace pstrain::evaluator
