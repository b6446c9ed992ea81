#include "ps_server/shard_store.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

SliceDef Slice(const std::string& var, int64_t rows, int64_t cols, int ps = 0) {
  SliceDef d;
  d.variable = var;
  d.row_end = rows;
  d.row_elements = cols;
  d.ps = ps;
  return d;
}

class ShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string w = Bytes({1, 2, 3, 4, 5, 6});
    std::string b = Bytes({0.5f, -0.5f});
    ASSERT_OK_AND_ASSIGN(bool created,
                         store_.Initialize({Slice("w", 3, 2), Slice("b", 2, 1)},
                                           {w, b}, {"sgd", 0.5f}));
    EXPECT_TRUE(created);
  }
  ShardStore store_{0};
};

TEST_F(ShardStoreTest, PullReturnsInitialValues) {
  std::string out;
  ASSERT_OK(store_.Pull("w/part_0", &out));
  EXPECT_EQ(Floats(out), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(ShardStoreTest, PushAppliesSgdAndCountsOneStepPerRequest) {
  std::string g = Bytes({2, 2, 2, 2, 2, 2}), gb = Bytes({1, 1});
  ASSERT_OK_AND_ASSIGN(int64_t step, store_.Push({{"w/part_0", g}, {"b/part_0", gb}}));
  EXPECT_EQ(step, 1);
  std::string out;
  ASSERT_OK(store_.Pull("w/part_0", &out));
  EXPECT_EQ(Floats(out), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  ASSERT_OK(store_.Pull("b/part_0", &out));
  EXPECT_EQ(Floats(out), (std::vector<float>{0, -1}));
  auto stats = store_.Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[1].key, "w/part_0");
  EXPECT_EQ(stats[1].bytes, 24);
  EXPECT_EQ(stats[1].pushes, 1);
  EXPECT_EQ(stats[1].pulls, 1);
}

TEST_F(ShardStoreTest, SecondInitializeKeepsValues) {
  ASSERT_OK_AND_ASSIGN(bool created,
                       store_.Initialize({Slice("w", 3, 2)},
                                         {Bytes({9, 9, 9, 9, 9, 9})}, {"sgd", 1}));
  EXPECT_FALSE(created);
  std::string out;
  ASSERT_OK(store_.Pull("w/part_0", &out));
  EXPECT_EQ(Floats(out)[0], 1);
}

TEST_F(ShardStoreTest, BadPushesChangeNothing) {
  std::string good = Bytes({1, 1, 1, 1, 1, 1});
  std::string short_grad = Bytes({1, 1});
  std::string one = Bytes({1});
  std::string nan = Bytes({1, std::nanf(""), 1, 1, 1, 1});
  std::string inf = Bytes({std::numeric_limits<float>::infinity(), 1});

  auto r = store_.Push({{"w/part_0", good}, {"b/part_0", one}});
  EXPECT_EQ(r.status().message(), "gradient for b/part_0 has 4 bytes, expected 8");
  r = store_.Push({{"b/part_0", inf}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "gradient for b/part_0 has a non-finite value (inf) at element 0");
  r = store_.Push({{"w/part_0", nan}});
  EXPECT_EQ(r.status().message(),
            "gradient for w/part_0 has a non-finite value (nan) at element 1");
  r = store_.Push({{"w/part_0", short_grad}});
  EXPECT_EQ(r.status().message(), "gradient for w/part_0 has 8 bytes, expected 24");
  r = store_.Push({{"nope/part_0", good}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "ps:0 holds no slice \"nope/part_0\"");
  r = store_.Push({{"w/part_0", good}, {"w/part_0", good}});
  EXPECT_EQ(r.status().message(), "push names slice w/part_0 twice");

  std::string out;
  ASSERT_OK(store_.Pull("w/part_0", &out));
  EXPECT_EQ(Floats(out), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(store_.global_step(), 0);
}

TEST(ShardStoreInitTest, RejectsWrongPsAndWrongLengthsAndStoresNothing) {
  ShardStore store(1);
  auto r = store.Initialize({Slice("w", 1, 1, /*ps=*/0)}, {Bytes({1})}, {"sgd", 1});
  EXPECT_EQ(r.status().message(), "slice w/part_0 is placed on ps:0, not on this ps:1");
  r = store.Initialize({Slice("w", 2, 1, 1)}, {Bytes({1})}, {"sgd", 1});
  EXPECT_EQ(r.status().message(), "initial value for w/part_0 has 4 bytes, expected 8");
  r = store.Initialize({Slice("w", 1, 1, 1)}, {Bytes({1})}, {"adamw", 1});
  EXPECT_EQ(r.status().message(), "unknown optimizer \"adamw\" (known: sgd, momentum, adagrad, adam)");
  EXPECT_FALSE(store.initialized());
  std::string out;
  EXPECT_EQ(store.Pull("w/part_0", &out).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreConcurrencyTest, AsyncPushesLoseNoUpdate) {
  ShardStore store(0);
  ASSERT_OK(store.Initialize({Slice("v", 4, 1)}, {Bytes({0, 0, 0, 0})}, {"sgd", 1})
                .status());
  constexpr int kThreads = 4, kPushes = 500;
  std::string g = Bytes({1, 1, 1, 1});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPushes; ++i) ASSERT_OK(store.Push({{"v/part_0", g}}).status());
    });
  }
  for (auto& t : threads) t.join();
  std::string out;
  ASSERT_OK(store.Pull("v/part_0", &out));
  EXPECT_EQ(Floats(out), std::vector<float>(4, -kThreads * kPushes));
  EXPECT_EQ(store.global_step(), kThreads * kPushes);
}

}  // namespace
}  // namespace pstrain::ps

namespace pstrain::ps {
namespace {

TEST(ShardStoreSlotsTest, AdamSlotsPersistAcrossPushesPerSlice) {
  ShardStore store(0);
  OptimizerSpec adam;
  adam.name = "adam";
  adam.learning_rate = 0.1f;
  adam.beta1 = 0.5f;
  adam.beta2 = 0.75f;
  ASSERT_OK(store.Initialize({Slice("a", 1, 1), Slice("b", 1, 1)}, {Bytes({0}), Bytes({0})}, adam)
                .status());
  std::string one = Bytes({1}), minus_two = Bytes({-2});
  ASSERT_OK(store.Push({{"a/part_0", one}, {"b/part_0", one}}).status());
  ASSERT_OK(store.Push({{"a/part_0", minus_two}}).status());
  std::string out;
  ASSERT_OK(store.Pull("a/part_0", &out));
  // The same two steps as OptimizerTest.AdamFirstStepsByHand.
  const double lr2 = 0.1 * std::sqrt(0.4375) / 0.75;
  EXPECT_NEAR(Floats(out)[0], -0.1 - lr2 * (-0.75) / (std::sqrt(1.1875) + 1e-7), 1e-6);
  // b had one update only: its own t is 1.
  ASSERT_OK(store.Pull("b/part_0", &out));
  EXPECT_NEAR(Floats(out)[0], -0.1, 1e-6);
}

}  // namespace
}  // namespace pstrain::ps
