// The checkpoint's hold on pushes, on a fake clock: a hold waits for the
// pushes being applied and stops new ones until released or until its
// lease ends. That a thread is blocked is seen from the clock's waiters,
// never from a sleep.
#include "store/push_hold.h"

#include <atomic>
#include <optional>
#include <thread>

#include "base/testing/fake_clock.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

using pstrain::testing::FakeClock;

TEST(PushHoldTest, PushesPassFreelyWithoutAHold) {
  PushHold hold;
  { PushHold::Pass a = hold.Enter(); }
  PushHold::Pass b = hold.Enter();
  PushHold::Pass c = hold.Enter();  // passes overlap freely
  EXPECT_FALSE(hold.held());
}

// Holds `hold` on another thread while `applying` (a pass taken before) is
// still being applied: the hold waits (on `clock`) until that pass ends.
void ExpectHoldWaitsFor(const FakeClock& clock, PushHold& hold,
                        std::optional<PushHold::Pass>& applying) {
  std::atomic<bool> held{false};
  std::thread holder([&] {
    ASSERT_OK(hold.Hold(absl::Seconds(30)));
    held = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1)) << "the hold never waited";
  EXPECT_FALSE(held) << "the hold returned while a push was still being applied";
  applying.reset();
  holder.join();
  EXPECT_TRUE(held);
  EXPECT_TRUE(hold.held());
}

TEST(PushHoldTest, AHoldWaitsForThePushBeingAppliedAndStopsTheNextUntilReleased) {
  FakeClock clock;
  PushHold hold(&clock);
  std::optional<PushHold::Pass> applying = hold.Enter();
  ExpectHoldWaitsFor(clock, hold, applying);

  std::atomic<bool> passed{false};
  std::thread pusher([&] {
    PushHold::Pass p = hold.Enter();
    passed = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1)) << "the push never waited";
  EXPECT_FALSE(passed) << "a push went through a hold";
  hold.Release();
  pusher.join();
  EXPECT_TRUE(passed);
  EXPECT_FALSE(hold.held());
}

TEST(PushHoldTest, TryEnterNeverWaitsAndItsPassCountsAsApplying) {
  FakeClock clock;
  PushHold hold(&clock);
  std::optional<PushHold::Pass> applying = hold.TryEnter();
  ASSERT_TRUE(applying.has_value());
  // The hold waits for that pass as for an Enter's.
  ExpectHoldWaitsFor(clock, hold, applying);
  // Held: refused at once (no wait on the clock), until released.
  EXPECT_FALSE(hold.TryEnter().has_value());
  EXPECT_EQ(clock.waiters(), 0);
  hold.Release();
  EXPECT_TRUE(hold.TryEnter().has_value());
  // And after a lease ends by itself.
  ASSERT_OK(hold.Hold(absl::Milliseconds(50)));
  EXPECT_FALSE(hold.TryEnter().has_value());
  clock.Advance(absl::Milliseconds(49));
  EXPECT_FALSE(hold.TryEnter().has_value());
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(hold.TryEnter().has_value());
}

TEST(PushHoldTest, AHoldEndsByItselfWhenItsLeaseEnds) {
  FakeClock clock;
  PushHold hold(&clock);
  ASSERT_OK(hold.Hold(absl::Milliseconds(200)));
  EXPECT_TRUE(hold.held());
  std::atomic<bool> passed{false};
  std::thread pusher([&] {
    PushHold::Pass p = hold.Enter();
    passed = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Milliseconds(199));
  EXPECT_TRUE(hold.held());
  EXPECT_FALSE(passed);
  clock.Advance(absl::Milliseconds(1));
  pusher.join();
  EXPECT_TRUE(passed);
  EXPECT_FALSE(hold.held());
  // A renewed hold stops pushes again.
  ASSERT_OK(hold.Hold(absl::Seconds(30)));
  EXPECT_TRUE(hold.held());
  hold.Release();
}

TEST(PushHoldTest, AHoldThatCannotDrainWithinItsLeaseFailsAndHoldsNothing) {
  FakeClock clock;
  PushHold hold(&clock);
  PushHold::Pass stuck = hold.Enter();
  absl::Status s;
  std::thread holder([&] { s = hold.Hold(absl::Milliseconds(50)); });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(absl::Milliseconds(50));
  holder.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("1 push(es) were still being applied"), std::string::npos) << s;
  EXPECT_FALSE(hold.held());
  PushHold::Pass next = hold.Enter();  // not blocked
}

TEST(PushHoldTest, ALeaseMustBePositive) {
  PushHold hold;
  const absl::Status s = hold.Hold(absl::ZeroDuration());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("positive lease"), std::string::npos) << s;
  EXPECT_FALSE(hold.held());
}

}  // namespace
}  // namespace pstrain::ps
