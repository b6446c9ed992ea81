#include "store/wait_list.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "base/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

TEST(WaitListTest, ReadyAttemptRunsAtOnce) {
  WaitList list;
  int runs = 0;
  list.RunWhenReady([&] { ++runs; return true; }, absl::InfiniteFuture(),
                    [] { FAIL() << "expired"; });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(list.parked(), 0);
}

TEST(WaitListTest, ParkedAttemptRunsAfterNotify) {
  WaitList list;
  std::atomic<bool> ready{false};
  std::atomic<int> done{0};
  list.RunWhenReady([&] { if (!ready) return false; ++done; return true; },
                    absl::InfiniteFuture(), [] { FAIL() << "expired"; });
  EXPECT_EQ(list.parked(), 1);
  list.Notify();  // not ready yet: parks again
  EXPECT_EQ(list.parked(), 1);
  ready = true;
  list.Notify();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(list.parked(), 0);
}

TEST(WaitListTest, ExpiresAtTheDeadlineOfItsClock) {
  pstrain::testing::FakeClock clock;
  WaitList list(&clock);
  absl::Notification expired;
  list.RunWhenReady([] { return false; }, clock.Now() + absl::Milliseconds(100),
                    [&] { expired.Notify(); });
  EXPECT_EQ(list.parked(), 1);
  clock.Advance(absl::Milliseconds(99));
  list.Notify();  // still waiting: parked again
  EXPECT_EQ(list.parked(), 1);
  EXPECT_FALSE(expired.HasBeenNotified());
  clock.Advance(absl::Milliseconds(1));
  // The timer thread expires it within its 50 ms (real) round.
  ASSERT_TRUE(expired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(list.parked(), 0);
}

TEST(WaitListTest, NoLostWakeUpUnderConcurrentNotify) {
  WaitList list;
  std::atomic<int> value{0};
  std::atomic<int> served{0};
  constexpr int kWaiters = 200;
  std::thread notifier([&] {
    for (int i = 1; i <= kWaiters; ++i) {
      value = i;
      list.Notify();
    }
  });
  for (int i = 1; i <= kWaiters; ++i) {
    list.RunWhenReady([&, i] { if (value < i) return false; ++served; return true; },
                      absl::InfiniteFuture(), [] {});
  }
  notifier.join();
  EXPECT_EQ(served, kWaiters);
  EXPECT_EQ(list.parked(), 0);
}

TEST(WaitListTest, DestructionExpiresParkedAttempts) {
  int expired = 0;
  {
    WaitList list;
    list.RunWhenReady([] { return false; }, absl::InfiniteFuture(), [&] { ++expired; });
  }
  EXPECT_EQ(expired, 1);
}

}  // namespace
}  // namespace pstrain::ps
