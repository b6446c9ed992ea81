#include "common/parallel_for.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ParallelForTest, CoversEveryIndexExactlyOnceOnGrainBounds) {
  for (int64_t n : {1, 7, 4096, 4097, 1000003}) {
    std::vector<std::atomic<int>> hits(n);
    ParallelFor(n, 4096, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(begin % 4096, 0);
      EXPECT_LE(end, n);
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

TEST(ParallelForTest, ConcurrentCallersEachGetTheirOwnResult) {
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      std::vector<int64_t> part(64, 0);
      std::atomic<int64_t> total{0};
      for (int rep = 0; rep < 50; ++rep) {
        ParallelFor(100000, 1000, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          total.fetch_add(s);
        });
      }
      sums[c] = total.load();
    });
  }
  for (auto& t : callers) t.join();
  for (int64_t s : sums) EXPECT_EQ(s, 50 * (100000LL * 99999 / 2));
}

}  // namespace
}  // namespace pstrain
