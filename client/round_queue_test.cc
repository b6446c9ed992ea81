// Rounds run in the order queued, on the queue's thread; a wait returns the
// largest step so far, or the first error, after which rounds are skipped
// until Drain clears it.
#include "client/round_queue.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::client {
namespace {

TEST(RoundQueueTest, RoundsRunInOrderAndAWaitSeesTheLargestStep) {
  RoundQueue q;
  std::vector<int> ran;
  absl::Notification go;
  const int64_t first = q.Enqueue([&]() -> absl::StatusOr<int64_t> {
    go.WaitForNotification();  // the caller goes on meanwhile
    ran.push_back(1);
    return 7;
  });
  const int64_t second = q.Enqueue([&]() -> absl::StatusOr<int64_t> {
    ran.push_back(2);
    return 3;
  });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
  go.Notify();
  ASSERT_OK_AND_ASSIGN(int64_t step, q.WaitFor(second));
  EXPECT_EQ(step, 7);
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  ASSERT_OK_AND_ASSIGN(step, q.WaitFor(0));
  EXPECT_EQ(step, 7);
}

TEST(RoundQueueTest, AfterAnErrorRoundsAreSkippedUntilDrained) {
  RoundQueue q;
  int ran = 0;
  q.Enqueue([]() -> absl::StatusOr<int64_t> { return absl::UnavailableError("ps:1 lost"); });
  const int64_t skipped = q.Enqueue([&]() -> absl::StatusOr<int64_t> {
    ++ran;
    return 1;
  });
  EXPECT_EQ(q.WaitFor(skipped).status().code(), absl::StatusCode::kUnavailable);
  absl::Status drained = q.Drain();
  EXPECT_EQ(drained.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ran, 0);
  const int64_t next = q.Enqueue([&]() -> absl::StatusOr<int64_t> {
    ++ran;
    return 2;
  });
  ASSERT_OK_AND_ASSIGN(int64_t step, q.WaitFor(next));
  EXPECT_EQ(step, 2);
  EXPECT_EQ(ran, 1);
  EXPECT_OK(q.Drain());
}

}  // namespace
}  // namespace pstrain::client
