#include "data/dataset.h"

#include <memory>
#include <set>

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

TEST(DatasetTest, LoadsFashionMnist) {
  ASSERT_OK_AND_ASSIGN(Dataset train, LoadMnistFormat(kFashionMnist, Split::kTrain));
  EXPECT_EQ(train.num_examples, 60000);
  EXPECT_EQ(train.example_dim, 784);
  ASSERT_OK_AND_ASSIGN(Dataset test, LoadMnistFormat(kFashionMnist, Split::kTest));
  EXPECT_EQ(test.num_examples, 10000);
  std::vector<int> per_class(10, 0);
  for (int32_t y : test.labels) per_class[y]++;
  for (int c : per_class) EXPECT_EQ(c, 1000);  // the test set is balanced
  float max = 0;
  for (float v : test.features) max = std::max(max, v);
  EXPECT_FLOAT_EQ(max, 1.0f);
}

TEST(DatasetTest, MissingDirectoryNamesTheFile) {
  auto ds = LoadMnistFormat("/nonexistent", Split::kTest);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("/nonexistent/t10k-images-idx3-ubyte"),
            absl::string_view::npos);
}

Dataset Counting(int n) {
  Dataset ds;
  ds.num_examples = n;
  ds.example_dim = 1;
  for (int i = 0; i < n; ++i) {
    ds.features.push_back(i);
    ds.labels.push_back(i % 10);
  }
  return ds;
}

TEST(ShardIteratorTest, ShardsAreDisjointAndCoverEveryRecordEachEpoch) {
  Dataset ds = Counting(100);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int> seen;
    for (int r = 0; r < 3; ++r) {
      ShardIterator it(&ds, r, 3, 1, 42);
      EXPECT_EQ(it.shard_size(), r == 0 ? 34 : 33);
      for (int64_t i = 0; i < it.shard_size() * epoch; ++i) {  // skip earlier epochs
        float f;
        int32_t y;
        it.Next(&f, &y);
      }
      for (int64_t i = 0; i < it.shard_size(); ++i) {
        float f;
        int32_t y;
        EXPECT_EQ(it.Next(&f, &y), epoch);
        EXPECT_TRUE(seen.insert(static_cast<int>(f)).second);
      }
    }
    EXPECT_EQ(seen.size(), 100u);
  }
}

TEST(ShardIteratorTest, ReplicaBatchesTogetherAreTheBatchOfOneLargerReplica) {
  Dataset ds = Counting(200);
  const int replicas = 3, batch = 4;
  ShardIterator whole(&ds, 0, 1, replicas * batch, 9);
  std::vector<std::unique_ptr<ShardIterator>> parts;
  for (int r = 0; r < replicas; ++r) {
    parts.push_back(std::make_unique<ShardIterator>(&ds, r, replicas, batch, 9));
  }
  // Two epochs: 16 steps of 12 examples each.
  for (int step = 0; step < 32; ++step) {
    std::vector<float> big(replicas * batch);
    std::vector<int32_t> y(replicas * batch);
    whole.Next(big.data(), y.data());
    std::multiset<float> want(big.begin(), big.end()), got;
    for (int r = 0; r < replicas; ++r) {
      std::vector<float> small(batch);
      std::vector<int32_t> ys(batch);
      parts[r]->Next(small.data(), ys.data());
      got.insert(small.begin(), small.end());
    }
    EXPECT_EQ(got, want) << "step " << step;
  }
}

TEST(ShardIteratorTest, ShuffleIsSeededAndChangesPerEpoch) {
  Dataset ds = Counting(64);
  auto epoch_order = [&](uint64_t seed, int epochs) {
    ShardIterator it(&ds, 0, 1, 8, seed);
    std::vector<float> out(64 * epochs);
    std::vector<int32_t> y(8);
    for (int b = 0; b < 8 * epochs; ++b) it.Next(out.data() + 8 * b, y.data());
    return out;
  };
  auto a = epoch_order(7, 2), b = epoch_order(7, 2), c = epoch_order(8, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 64),
            std::vector<float>(a.begin() + 64, a.end()));
}

TEST(ShardIteratorTest, SkipLandsWhereNextWouldHave) {
  Dataset ds = Counting(50);
  ShardIterator walked(&ds, 1, 2, 4, 3), skipped(&ds, 1, 2, 4, 3);
  std::vector<float> a(4), b(4);
  std::vector<int32_t> y(4);
  for (int i = 0; i < 13; ++i) walked.Next(a.data(), y.data());  // across two epochs
  skipped.Skip(13);
  EXPECT_EQ(walked.Next(a.data(), y.data()), skipped.Next(b.data(), y.data()));
  EXPECT_EQ(a, b);
}

TEST(ShardIteratorTest, DropsTheShortLastBatch) {
  Dataset ds = Counting(10);
  ShardIterator it(&ds, 0, 1, 4, 1);
  EXPECT_EQ(it.batches_per_epoch(), 2);
  float f[4];
  int32_t y[4];
  EXPECT_EQ(it.Next(f, y), 0);
  EXPECT_EQ(it.Next(f, y), 0);
  EXPECT_EQ(it.Next(f, y), 1);
}

}  // namespace
}  // namespace pstrain::data
