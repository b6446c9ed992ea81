// The chief's periodic checkpoints, against PS in the test's process: one
// every N global steps, counted from the last one written.
#include "coordinator/checkpoint_loop.h"

#include "cluster/checkpoint_layout.h"
#include "coordinator/testing/in_process_job.h"
#include "gmock/gmock.h"

namespace pstrain::coordinator {
namespace {

using testing::InProcessJob;


TEST(CheckpointLoopTest, ACheckpointEveryNGlobalStepsFromTheLastOne) {
  InProcessJob job("loop_steps", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK(keeper.TakeOver().status());
  CheckpointLoopOptions options;
  options.every_secs = 0;
  options.every_steps = 5;
  options.poll = absl::Milliseconds(5);
  CheckpointLoop loop(&job.admin(), &keeper, options);
  job.Push(0, 0.125f, 6);
  loop.Start();
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return keeper.last_checkpoint() == 6; }));
  // Steps 7..10 are fewer than 5 past the last: the next is at 11.
  job.Push(1, 0.125f, 5);
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return keeper.last_checkpoint() == 11; }));
  loop.Stop();
  EXPECT_EQ(ListCheckpointSteps(job.dir()), (std::vector<int64_t>{0, 6, 11}));
}

// Before the chief stops the PS: no periodic checkpoint starts once the
// loop is told to stop (it would only fail on PS that are going).
TEST(CheckpointLoopTest, NoCheckpointStartsAfterAStopIsRequested) {
  InProcessJob job("loop_quiet", 2);
  PsKeeper keeper(&job.admin(), job.KeeperOptions());
  ASSERT_OK(keeper.TakeOver().status());
  CheckpointLoopOptions options;
  options.every_secs = 0;
  options.every_steps = 1;
  options.poll = absl::Milliseconds(5);
  CheckpointLoop loop(&job.admin(), &keeper, options);
  job.Push(0, 0.125f, 2);
  loop.Start();
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] { return keeper.last_checkpoint() == 2; }));
  loop.RequestStop();
  job.Push(1, 0.125f, 3);
  absl::SleepFor(absl::Milliseconds(100));  // 20 polls
  EXPECT_EQ(keeper.last_checkpoint(), 2);
  loop.Stop();
  EXPECT_EQ(ListCheckpointSteps(job.dir()), (std::vector<int64_t>{0, 2}));
}

}  // namespace
}  // namespace pstrain::coordinator
