#include <cstdio>
#include <cstring>
#include <map>

#include "checkpoint/reshard.h"
#include "base/file_util.h"
#include "cluster/placement.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "store/shard_store.h"

namespace pstrain::ps {
namespace {

// Two dense variables, one sliced by rows, a non-trainable one sliced too
// (moving statistics: values alone, no slots), and an embedding table.
std::vector<VariableDef> Variables() {
  VariableDef w{"w", {30, 4}};
  VariableDef b{"b", {4}};
  VariableDef m{"m", {30, 2}};
  m.update = VariableUpdate::kIncrement;
  VariableDef emb{"emb", {1000, 2}};
  emb.embedding = true;
  return {w, b, m, emb};
}

Placement PlacementFor(int num_ps) {
  PlacementOptions o;
  o.min_slice_bytes = 64;  // slice w on every PS
  auto p = ComputePlacement(Variables(), num_ps, o);
  EXPECT_OK(p.status());
  return *p;
}

ShardStore::JobConfig AdamJob() {
  ShardStore::JobConfig job;
  job.optimizer = {"adam", 0.01f};
  job.consistency = *ParseConsistency("async");
  job.generation = 1;
  return job;
}

// Creates the stores of `num_ps` PS, each slice filled with `fill` (or the
// variable's element index / 100 when fill < 0).
std::vector<std::unique_ptr<ShardStore>> MakeStores(int num_ps, float fill,
                                                    bool await_restore = false) {
  const Placement p = PlacementFor(num_ps);
  std::vector<std::unique_ptr<ShardStore>> stores;
  std::vector<std::string> values;  // kept alive while Initialize reads them
  for (int ps = 0; ps < num_ps; ++ps) {
    stores.push_back(std::make_unique<ShardStore>(ps, num_ps));
    std::vector<ShardStore::DenseInit> dense;
    values.clear();
    values.reserve(p.slices.size());
    for (const SliceDef& s : p.SlicesOn(ps)) {
      std::vector<float> v(s.elements());
      for (int64_t i = 0; i < s.elements(); ++i) {
        v[i] = fill >= 0 ? fill : (s.element_offset() + i) / 100.0f;
      }
      values.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * 4);
      ShardStore::DenseInit d;
      d.def = s;
      d.update = s.variable == "m" ? VariableUpdate::kIncrement : VariableUpdate::kOptimizer;
      d.has_value = true;
      d.value = values.back();
      dense.push_back(d);
    }
    ShardStore::EmbeddingInit table{"emb", 1000, 2, "", "uniform:0.1"};
    EXPECT_OK(stores.back()->Initialize(AdamJob(), dense, {table}, await_restore).status());
  }
  return stores;
}

// Pushes one gradient to every tensor of `store` (tables: rows 0..19 that
// the PS owns), through the frame parsing the service uses.
void PushOnce(ShardStore& store, int step) {
  ShardStore::PushBatch batch;
  std::string payload;
  std::vector<std::vector<int64_t>> ids;
  ids.reserve(8);
  // Kept alive: the batch's tensor keys point into it.
  const std::vector<ckpt::TargetTensor> layout = store.Layout();
  for (const ckpt::TargetTensor& t : layout) {
    int64_t n;
    if (t.embedding) {
      ids.emplace_back();
      for (int64_t id = 0; id < 20; ++id) {
        if (EmbeddingOwner(id, store.num_ps()) == store.ps_index()) ids.back().push_back(id);
      }
      n = static_cast<int64_t>(ids.back().size()) * t.dim;
      batch.tensors.push_back({t.key, ids.back(), 0, -1});
    } else {
      n = (t.row_end - t.row_begin) * t.row_elements;
      batch.tensors.push_back({t.key, {}, 0, -1});
    }
    for (int64_t i = 0; i < n; ++i) {
      const float g = 0.1f * ((i * 7 + step * 3 + static_cast<int>(t.row_begin)) % 11) - 0.5f;
      payload.append(reinterpret_cast<const char*>(&g), 4);
    }
  }
  Payload received;
  received.Append(payload.data(), static_cast<int64_t>(payload.size()));
  ASSERT_OK(store.Push(batch, received).status());
}

// A model's state independent of how it is sliced: per dense variable, its
// planes (values, then each slot) over every row; per table row, its
// floats and update count; per tensor key's variable, the update count.
struct Whole {
  std::map<std::string, std::map<int64_t, std::vector<float>>> dense_rows;  // var -> row -> planes
  std::map<int64_t, std::pair<std::vector<float>, int64_t>> table_rows;
  std::map<std::string, int64_t> updates;
  bool operator==(const Whole& o) const {
    return dense_rows == o.dense_rows && table_rows == o.table_rows && updates == o.updates;
  }
};

Whole Gather(const std::vector<ckpt::ShardContents>& shards) {
  Whole whole;
  for (const ckpt::ShardContents& shard : shards) {
    for (const v1::TensorCheckpoint& c : shard.tensors) {
      const int planes = c.update().empty() ? 1 + shard.header.num_slots() : 1;
      const float* f = reinterpret_cast<const float*>(c.data().data());
      if (c.embedding()) {
        const int64_t stride = c.dim() * planes;
        for (int r = 0; r < c.row_ids_size(); ++r) {
          whole.table_rows[c.row_ids(r)] = {std::vector<float>(f + r * stride, f + (r + 1) * stride),
                                            c.row_updates(r)};
        }
        continue;
      }
      whole.updates[c.variable()] = c.updates();
      const int64_t elements = c.elements();
      for (int64_t row = c.row_begin(); row < c.row_end(); ++row) {
        std::vector<float>& out = whole.dense_rows[c.variable()][row];
        for (int p = 0; p < planes; ++p) {
          const float* src = f + p * elements + (row - c.row_begin()) * c.row_elements();
          out.insert(out.end(), src, src + c.row_elements());
        }
      }
    }
  }
  return whole;
}

std::vector<ckpt::ShardContents> SnapshotAll(const std::vector<std::unique_ptr<ShardStore>>& stores,
                                       int64_t step) {
  std::vector<ckpt::ShardContents> out;
  for (const auto& s : stores) {
    auto snap = s->Snapshot(step);
    EXPECT_OK(snap.status());
    out.push_back(*std::move(snap));
  }
  return out;
}

class ReshardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/reshard";
    std::vector<std::unique_ptr<ShardStore>> two = MakeStores(2, -1);
    for (int step = 0; step < 5; ++step) {
      for (auto& s : two) PushOnce(*s, step);
    }
    original_ = SnapshotAll(two, 5);
    for (const ckpt::ShardContents& shard : original_) {
      ASSERT_OK(ckpt::WriteShard(ShardPath(dir_, 5, shard.header.ps_index(), 2), shard).status());
    }
  }

  std::string dir_;
  std::vector<ckpt::ShardContents> original_;
};

// N=2 onto M=3 and M=1: every value, Adam slot, update count and table row
// equals the original.
TEST_F(ReshardTest, TwoPsRestoreOntoThreeAndOne) {
  const Whole want = Gather(original_);
  ASSERT_EQ(want.dense_rows.at("w").size(), 30u);
  ASSERT_EQ(want.dense_rows.at("m").size(), 30u);
  ASSERT_EQ(want.dense_rows.at("m").at(0).size(), 2u);  // its values alone
  EXPECT_GT(original_[1].tensors.size(), 2u);  // m sliced onto both PS
  ASSERT_GT(want.table_rows.size(), 10u);
  EXPECT_EQ(want.updates.at("w"), 5);
  for (int m : {3, 1}) {
    SCOPED_TRACE(m);
    std::vector<std::unique_ptr<ShardStore>> stores = MakeStores(m, 0.0f, /*await_restore=*/true);
    for (auto& s : stores) {
      EXPECT_FALSE(s->ready());
      ASSERT_OK_AND_ASSIGN(ckpt::ShardContents shard,
                           ckpt::ReadCheckpointFor(dir_, 5, 2, s->ps_index(), m, s->Layout()));
      ASSERT_OK(s->Restore(shard, 4));
      EXPECT_TRUE(s->ready());
      EXPECT_EQ(s->generation(), 4);
      EXPECT_EQ(s->restored_step(), 5);
    }
    EXPECT_TRUE(Gather(SnapshotAll(stores, 5)) == want);
  }
}

TEST_F(ReshardTest, AMissingOrDamagedShardIsNamedAndNothingChanges) {
  std::vector<std::unique_ptr<ShardStore>> stores = MakeStores(3, 0.5f);
  const std::string shard1 = ShardPath(dir_, 5, 1, 2);
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(shard1));
  bytes[bytes.size() / 2] ^= 0x01;
  ASSERT_OK(WriteFileAtomically(shard1, bytes));
  auto r = ckpt::ReadCheckpointFor(dir_, 5, 2, 0, 3, stores[0]->Layout());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(shard1), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos) << r.status();
  ASSERT_EQ(std::remove(shard1.c_str()), 0);
  r = ckpt::ReadCheckpointFor(dir_, 5, 2, 0, 3, stores[0]->Layout());
  EXPECT_NE(r.status().message().find(shard1), std::string::npos) << r.status();
  // The store was not touched.
  const Whole after = Gather(SnapshotAll(stores, 0));
  EXPECT_EQ(after.dense_rows.at("w").at(7)[0], 0.5f);
}

TEST(ResharderTest, RowsInNoShardAreNamed) {
  std::vector<std::unique_ptr<ShardStore>> two = MakeStores(2, 1.0f);
  std::vector<ckpt::ShardContents> shards = SnapshotAll(two, 3);
  std::vector<std::unique_ptr<ShardStore>> one = MakeStores(1, 0.0f);
  ckpt::Resharder r(one[0]->Layout(), 0, 1);
  ASSERT_OK(r.Add(shards[0]));
  EXPECT_EQ(r.Finish().status().message(),
            "checkpoint at step 3: shard 1 of 2 was not read");
  ckpt::Resharder again(one[0]->Layout(), 0, 1);
  ASSERT_OK(again.Add(shards[0]));
  EXPECT_EQ(again.Add(shards[0]).message(),
            "checkpoint shard 0 of 2 at step 3: it was given twice or its index is out of range");
  // A slice without its row layout (older files) cannot be re-sliced.
  shards[1].tensors[0].clear_variable();
  EXPECT_NE(again.Add(shards[1]).message().find("lacks its row layout"), std::string::npos);
}

}  // namespace
}  // namespace pstrain::ps
