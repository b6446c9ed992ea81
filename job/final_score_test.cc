#include "job/final_score.h"

#include <atomic>
#include <thread>

#include "base/file_util.h"
#include "base/testing/fake_clock.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "cluster/checkpoint_layout.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The evaluator's record of the last step it scored, as it writes it.
void Scored(const std::string& dir, int64_t step) {
  ASSERT_OK(MakeDirs(dir + "/eval"));
  ASSERT_OK(WriteFileAtomically(ScoredPath(dir), std::to_string(step) + "\n"));
}

TEST(FinalScoreTest, AStepScoredAlreadyOrNoWaitReturnsAtOnce) {
  const std::string dir = testing::FreshTempDir("scored_already");
  testing::FakeClock clock;
  EXPECT_FALSE(WaitForFinalScore(dir, 300, absl::ZeroDuration(), absl::Seconds(1), &clock));
  Scored(dir, 300);
  EXPECT_TRUE(WaitForFinalScore(dir, 300, absl::Minutes(10), absl::Seconds(1), &clock));
  EXPECT_TRUE(WaitForFinalScore(dir, 200, absl::Minutes(10), absl::Seconds(1), &clock));
  EXPECT_EQ(clock.waits_begun(), 0);
}

TEST(FinalScoreTest, WaitsUntilTheEvaluatorScoresTheStep) {
  const std::string dir = testing::FreshTempDir("scored_later");
  Scored(dir, 200);  // an earlier checkpoint's score
  testing::FakeClock clock;
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    result = WaitForFinalScore(dir, 300, absl::Minutes(10), absl::Seconds(1), &clock) ? 1 : 0;
  });
  ASSERT_TRUE(clock.AwaitWaitsBegun(1));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(clock.AwaitWaitsBegun(2));
  EXPECT_EQ(result.load(), -1);  // still waiting: step 200 is not the final one
  Scored(dir, 300);
  clock.Advance(absl::Seconds(1));
  waiter.join();
  EXPECT_EQ(result.load(), 1);
}

TEST(FinalScoreTest, GivesUpAfterTheWait) {
  const std::string dir = testing::FreshTempDir("never_scored");
  testing::FakeClock clock;
  std::atomic<int> result{-1};
  std::thread waiter([&] {
    result = WaitForFinalScore(dir, 300, absl::Seconds(3), absl::Seconds(1), &clock) ? 1 : 0;
  });
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(clock.AwaitWaitsBegun(i));
    clock.Advance(absl::Seconds(1));
  }
  waiter.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(clock.waits_begun(), 3);
}

}  // namespace
}  // namespace pstrain
