#include "cluster/placement.h"

#include <algorithm>
#include <random>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<VariableDef> Network() {
  return {{"dense_0/kernel", {784, 256}}, {"dense_0/bias", {256}},
          {"dense_1/kernel", {256, 256}}, {"dense_1/bias", {256}},
          {"dense_2/kernel", {256, 10}},  {"dense_2/bias", {10}}};
}

// Every row of every variable is held by exactly one slice.
void ExpectEveryRowOwnedOnce(const Placement& p) {
  for (const VariableDef& v : p.variables) {
    std::vector<int> owners(v.rows(), 0);
    for (const SliceDef& s : p.SlicesOf(v.name)) {
      ASSERT_GE(s.ps, 0);
      ASSERT_LT(s.ps, p.num_ps);
      EXPECT_EQ(s.row_elements, v.row_elements());
      for (int64_t r = s.row_begin; r < s.row_end; ++r) owners[r]++;
    }
    for (int64_t r = 0; r < v.rows(); ++r) {
      ASSERT_EQ(owners[r], 1) << v.name << " row " << r;
    }
  }
}

TEST(PlacementTest, IsDeterministicAndIndependentOfInputOrder) {
  auto vars = Network();
  ASSERT_OK_AND_ASSIGN(Placement a, ComputePlacement(vars, 3));
  std::mt19937 rng(7);
  std::shuffle(vars.begin(), vars.end(), rng);
  ASSERT_OK_AND_ASSIGN(Placement b, ComputePlacement(vars, 3));
  for (const VariableDef& v : vars) {
    auto sa = a.SlicesOf(v.name), sb = b.SlicesOf(v.name);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].ps, sb[i].ps);
      EXPECT_EQ(sa[i].row_begin, sb[i].row_begin);
      EXPECT_EQ(sa[i].row_end, sb[i].row_end);
    }
  }
  EXPECT_EQ(a.bytes_per_ps, b.bytes_per_ps);
}

TEST(PlacementTest, SplitsLargeVariablesByRowsAcrossDistinctPs) {
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(Network(), 2));
  auto slices = p.SlicesOf("dense_0/kernel");  // 784x256x4 = 784 KiB
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].row_begin, 0);
  EXPECT_EQ(slices[0].row_end, 392);
  EXPECT_EQ(slices[1].row_begin, 392);
  EXPECT_EQ(slices[1].row_end, 784);
  EXPECT_NE(slices[0].ps, slices[1].ps);
  EXPECT_EQ(slices[0].key(), "dense_0/kernel/part_0");
  EXPECT_EQ(slices[1].element_offset(), 392 * 256);
  // 256 KiB is below twice the minimum: one slice.
  EXPECT_EQ(p.SlicesOf("dense_1/kernel").size(), 1u);
  ExpectEveryRowOwnedOnce(p);
}

TEST(PlacementTest, BalancedWithinOneSliceOnSkewedShapes) {
  std::vector<VariableDef> vars = {{"huge", {100000, 64}}, {"mid", {3000, 33}},
                                   {"tiny_a", {7}},        {"tiny_b", {1, 3}},
                                   {"wide", {5, 50000}},   {"odd", {1001, 17}}};
  for (int num_ps : {1, 2, 3, 5, 8}) {
    ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement(vars, num_ps));
    ExpectEveryRowOwnedOnce(p);
    int64_t total = 0, largest_slice = 0;
    for (const SliceDef& s : p.slices) {
      total += s.bytes();
      largest_slice = std::max(largest_slice, s.bytes());
    }
    ASSERT_EQ(static_cast<int>(p.bytes_per_ps.size()), num_ps);
    int64_t ideal = total / num_ps;
    for (int64_t b : p.bytes_per_ps) {
      EXPECT_LE(b, ideal + largest_slice) << num_ps << " ps";
      EXPECT_GE(b + largest_slice, ideal) << num_ps << " ps";
    }
  }
}

TEST(PlacementTest, NeverMoreSlicesThanRowsOrPs) {
  ASSERT_OK_AND_ASSIGN(Placement p,
                       ComputePlacement({{"wide", {3, 1 << 20}}}, 8));
  EXPECT_EQ(p.slices.size(), 3u);
  ExpectEveryRowOwnedOnce(p);
}

TEST(PlacementTest, EveryEmbeddingRowHasExactlyOneBalancedOwner) {
  for (int num_ps : {1, 2, 3, 7}) {
    std::vector<int64_t> rows(num_ps, 0);
    constexpr int64_t kVocab = 100000;
    for (int64_t id = 0; id < kVocab; ++id) {
      const int owner = EmbeddingOwner(id, num_ps);
      ASSERT_GE(owner, 0);
      ASSERT_LT(owner, num_ps);
      EXPECT_EQ(owner, EmbeddingOwner(id, num_ps));  // deterministic
      ++rows[owner];
    }
    for (int64_t r : rows) {
      // Within 4% of the ideal share (over 5 standard deviations of a
      // uniform hash at 7 PS): the hash spreads consecutive ids.
      EXPECT_NEAR(r, kVocab / num_ps, kVocab / num_ps / 25) << num_ps;
    }
  }
}

TEST(PlacementTest, EmbeddingTablesCountTowardsLoadAndAreNotSliced) {
  VariableDef emb{"emb", {1000, 64}};
  emb.embedding = true;
  ASSERT_OK_AND_ASSIGN(Placement p,
                       ComputePlacement({emb, {"w", {10, 10}}, {"b", {10}}}, 2));
  ASSERT_EQ(p.embeddings.size(), 1u);
  EXPECT_EQ(p.embeddings[0].name, "emb");
  for (const SliceDef& s : p.slices) EXPECT_NE(s.variable, "emb");
  EXPECT_EQ(p.slices.size(), 2u);
  // 500 rows of 256 bytes each per PS, plus the dense ones on the lighter.
  EXPECT_EQ(p.bytes_per_ps[0] + p.bytes_per_ps[1], 1000 * 256 + 400 + 40);
  EXPECT_GE(p.bytes_per_ps[0], 500 * 256);
  EXPECT_GE(p.bytes_per_ps[1], 500 * 256);

  VariableDef bad{"e3", {10, 2, 2}};
  bad.embedding = true;
  auto r = ComputePlacement({bad}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "embedding table \"e3\" has rank 3; it must be [vocabulary, dim]");
}

TEST(PlacementTest, RejectsBadInput) {
  EXPECT_EQ(ComputePlacement(Network(), 0).status().message(),
            "placement needs at least one ps, got 0");
  EXPECT_EQ(ComputePlacement({{"a", {2}}, {"a", {3}}}, 1).status().message(),
            "variable \"a\" is defined twice");
  EXPECT_EQ(ComputePlacement({{"a", {2, 0}}}, 1).status().message(),
            "variable \"a\" has a dimension of 0");
  EXPECT_EQ(ComputePlacement({{"", {2}}}, 1).status().message(),
            "variable with an empty name");
}

}  // namespace
}  // namespace pstrain
