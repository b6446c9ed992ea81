#include "optim/count_table.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

TEST(CountTableTest, HoldsWhatFillReturnsAndFillsEachChunkOnce) {
  CountTable<2> table;
  int calls = 0;
  auto fill = [&calls](int64_t t, float* out) {
    ++calls;
    out[0] = static_cast<float>(std::pow(0.999, t));
    out[1] = static_cast<float>(t);
  };
  for (int64_t t : {1, 2, 4095, 4096, 4097, 65535}) {
    const float* v = table.Get(t, fill);
    ASSERT_NE(v, nullptr) << t;
    EXPECT_EQ(v[0], static_cast<float>(std::pow(0.999, t))) << t;
    EXPECT_EQ(v[1], static_cast<float>(t)) << t;
  }
  // Chunks 0 (counts 1..4095), 1 and 15, each filled once.
  EXPECT_EQ(calls, 4095 + 4096 + 4096);
  table.Get(3, fill);
  table.Get(8191, fill);
  EXPECT_EQ(calls, 4095 + 4096 + 4096);
}

TEST(CountTableTest, CountsOutsideTheTableAreLeftToTheCaller) {
  CountTable<1> table;
  auto fill = [](int64_t t, float* out) { *out = static_cast<float>(t); };
  EXPECT_EQ(table.Get(0, fill), nullptr);
  EXPECT_EQ(table.Get(-5, fill), nullptr);
  EXPECT_EQ(table.Get(CountTable<1>::kLimit, fill), nullptr);
  EXPECT_EQ(table.Get(int64_t{1} << 40, fill), nullptr);
}

TEST(CountTableTest, ConcurrentReadersSeeFilledEntries) {
  CountTable<1> table;
  std::atomic<int> calls{0};
  auto fill = [&calls](int64_t t, float* out) {
    calls.fetch_add(1, std::memory_order_relaxed);
    *out = static_cast<float>(t) * 0.5f;
  };
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int64_t t = 1 + k; t < 20000; t += 7) {
        if (*table.Get(t, fill) != static_cast<float>(t) * 0.5f) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(calls.load(), 5 * 4096 - 1);  // chunks 0..4, none twice
}

}  // namespace
}  // namespace pstrain::optim
