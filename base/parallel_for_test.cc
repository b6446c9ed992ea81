#include "base/parallel_for.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/cpu_limit.h"
#include "base/process_stats.h"
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

TEST(ParallelPoolTest, ASharesCallToForFromInsideAShareCompletes) {
  // Every helper runs a share that calls For() again and waits for it; the
  // inner shares are run by the waiting callers themselves.
  absl::Notification done;
  std::atomic<int64_t> total{0};
  std::thread caller([&] {
    ParallelPool pool(2);
    pool.For(8, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        pool.For(1000, 10, [&](int64_t ib, int64_t ie) { total.fetch_add(ie - ib); });
      }
    });
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    ADD_FAILURE() << "nested For() did not finish in 30 s";
    std::fflush(nullptr);
    std::_Exit(1);  // the caller cannot be joined
  }
  caller.join();
  EXPECT_EQ(total.load(), 8 * 1000);
}

TEST(ParallelPoolTest, HelpersAreJoinedWhenThePoolIsDestroyed) {
  const int before = ThreadCount().value();
  {
    ParallelPool pool(3);
    EXPECT_EQ(pool.helper_threads(), 3);
    EXPECT_EQ(ThreadCount().value(), before + 3);
    std::atomic<int> shares{0};
    pool.For(4, 1, [&](int64_t, int64_t) { shares.fetch_add(1); });
    EXPECT_EQ(shares.load(), 4);
  }
  EXPECT_EQ(ThreadCount().value(), before);
}

TEST(ParallelPoolTest, WithoutHelpersEverythingRunsInlineInOneShare) {
  ParallelPool pool(0);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.For(100, 10, [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); });
  EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
}

TEST(ParallelForTest, TheProcessPoolUsesOneHelperFewerThanTheUsableCores) {
  const int before = ThreadCount().value();
  std::atomic<int> shares{0};
  ParallelFor(1 << 20, 1, [&](int64_t, int64_t) { shares.fetch_add(1); });
  EXPECT_EQ(shares.load(), std::min(64, UsableCores()));
  // The pool may have started in an earlier test of this binary.
  EXPECT_LE(ThreadCount().value(), before + UsableCores() - 1);
}

}  // namespace
}  // namespace pstrain
