#include "store/push_hold.h"

#include <atomic>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

TEST(PushHoldTest, PushesPassFreelyWithoutAHold) {
  PushHold hold;
  { PushHold::Pass a = hold.Enter(); }
  PushHold::Pass b = hold.Enter();
  PushHold::Pass c = hold.Enter();  // passes overlap freely
  EXPECT_FALSE(hold.held());
}

// Holds `hold` on another thread while `applying` (a pass taken before) is
// still being applied: the hold does not return until that pass ends.
void ExpectHoldWaitsFor(PushHold& hold, std::optional<PushHold::Pass>& applying) {
  std::atomic<bool> held{false};
  std::thread holder([&] {
    ASSERT_OK(hold.Hold(absl::Seconds(30)));
    held = true;
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(held) << "the hold returned while a push was still being applied";
  applying.reset();
  holder.join();
  EXPECT_TRUE(held);
  EXPECT_TRUE(hold.held());
}

TEST(PushHoldTest, AHoldWaitsForThePushBeingAppliedAndStopsTheNextUntilReleased) {
  PushHold hold;
  std::optional<PushHold::Pass> applying = hold.Enter();
  ExpectHoldWaitsFor(hold, applying);

  std::atomic<bool> passed{false};
  std::thread pusher([&] {
    PushHold::Pass p = hold.Enter();
    passed = true;
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(passed) << "a push went through a hold";
  hold.Release();
  pusher.join();
  EXPECT_TRUE(passed);
  EXPECT_FALSE(hold.held());
}

TEST(PushHoldTest, TryEnterNeverWaitsAndItsPassCountsAsApplying) {
  PushHold hold;
  std::optional<PushHold::Pass> applying = hold.TryEnter();
  ASSERT_TRUE(applying.has_value());
  // The hold waits for that pass as for an Enter's.
  ExpectHoldWaitsFor(hold, applying);
  // Held: refused at once, until released.
  const absl::Time start = absl::Now();
  EXPECT_FALSE(hold.TryEnter().has_value());
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  hold.Release();
  EXPECT_TRUE(hold.TryEnter().has_value());
  // And after a lease ends by itself.
  ASSERT_OK(hold.Hold(absl::Milliseconds(50)));
  EXPECT_FALSE(hold.TryEnter().has_value());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(hold.TryEnter().has_value());
}

TEST(PushHoldTest, AHoldEndsByItselfWhenItsLeaseEnds) {
  PushHold hold;
  const absl::Time start = absl::Now();
  ASSERT_OK(hold.Hold(absl::Milliseconds(200)));
  EXPECT_TRUE(hold.held());
  { PushHold::Pass p = hold.Enter(); }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_FALSE(hold.held());
  // A renewed hold stops pushes again.
  ASSERT_OK(hold.Hold(absl::Seconds(30)));
  EXPECT_TRUE(hold.held());
  hold.Release();
}

TEST(PushHoldTest, AHoldThatCannotDrainWithinItsLeaseFailsAndHoldsNothing) {
  PushHold hold;
  PushHold::Pass stuck = hold.Enter();
  const absl::Status s = hold.Hold(absl::Milliseconds(50));
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
