// The chief's PS watch, against PS in the test's process: a PS that comes
// back empty gets every PS restored under a new generation, which the
// tracker hands to the replicas; one away for longer than ps_wait fails the
// job naming it; a permanent failure of the job stops the PS.
#include "coordinator/ps_watch.h"

#include "absl/synchronization/notification.h"
#include "coordinator/testing/in_process_job.h"
#include "gmock/gmock.h"

namespace pstrain::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::InProcessJob;


PsWatchOptions Fast(absl::Duration ps_wait = absl::Seconds(10)) {
  PsWatchOptions o;
  o.heartbeat = absl::Milliseconds(10);
  o.ps_wait = ps_wait;
  return o;
}

TEST(PsWatchTest, APsBackWithoutVariablesGetsEveryPsRestoredUnderANewGeneration) {
  InProcessJob job("watch_restart", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  JobTracker tracker(job.cluster_spec(), true);
  ASSERT_OK_AND_ASSIGN(int64_t generation, keeper.TakeOver());
  tracker.SetGeneration(generation);
  job.Push(0, 0.25f, 3);
  ASSERT_OK(keeper.CheckpointNow());
  const std::vector<float> at_three = job.Values();
  PsWatch watch(&job.admin(), &keeper, &tracker, Fast());
  watch.Start();
  // Seen whole at step 8 before ps:0 goes.
  job.Push(1, 0.25f, 5);
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return keeper.seen_step() == 8; }));
  job.cluster().Stop(0);
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return watch.ps_down() == 1; }));
  job.cluster().Start(0);
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return tracker.generation() == 2; }));
  watch.Stop();
  EXPECT_EQ(watch.ps_down(), 0);
  EXPECT_EQ(keeper.rolled_back(), 5);
  EXPECT_EQ(job.Values(), at_three);
  EXPECT_OK(tracker.failure());
}

TEST(PsWatchTest, APsAwayLongerThanPsWaitFailsTheJobNamingIt) {
  InProcessJob job("watch_away", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  JobTracker tracker(job.cluster_spec(), true);
  ASSERT_OK(keeper.TakeOver().status());
  PsWatch watch(&job.admin(), &keeper, &tracker, Fast(absl::Milliseconds(100)));
  watch.Start();
  job.cluster().Stop(1);
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return !tracker.failure().ok(); }));
  EXPECT_EQ(tracker.failure().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(tracker.failure().message(), HasSubstr("ps:1 (in process) has not answered for"));
}

TEST(PsWatchTest, APermanentFailureOfTheJobIsHandedOnAndEndsTheWatch) {
  InProcessJob job("watch_failed", 1);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  JobTracker tracker(job.cluster_spec(), true);
  ASSERT_OK(keeper.TakeOver().status());
  absl::Notification handed;
  absl::Status why;
  PsWatchOptions options = Fast();
  options.on_permanent_failure = [&](const absl::Status& s) {
    why = s;
    handed.Notify();
  };
  PsWatch watch(&job.admin(), &keeper, &tracker, options);
  watch.Start();
  tracker.Fail(absl::InvalidArgumentError("worker:1 runs another model"));
  ASSERT_TRUE(handed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_THAT(why.message(), HasSubstr("another model"));
}

}  // namespace
}  // namespace pstrain::coordinator
