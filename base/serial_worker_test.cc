#include "base/serial_worker.h"

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Tasks run on the worker's own thread, in order, one at a time; Run does
// not wait for them.
TEST(SerialWorkerTest, RunsTasksInOrderOnItsOwnThreadWithoutBlockingTheCaller) {
  std::vector<int> order;
  std::thread::id ran_on;
  absl::Notification release, done;
  {
    SerialWorker worker;
    worker.Run([&] {
      ran_on = std::this_thread::get_id();
      release.WaitForNotification();  // the caller goes on meanwhile
      order.push_back(1);
    });
    worker.Run([&] { order.push_back(2); });
    worker.Run([&] {
      order.push_back(3);
      done.Notify();
    });
    release.Notify();
    done.WaitForNotification();
  }
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// The destructor runs what is still queued before it returns.
TEST(SerialWorkerTest, DestructorRunsWhatIsQueued) {
  int ran = 0;
  {
    SerialWorker worker;
    for (int i = 0; i < 100; ++i) worker.Run([&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace pstrain
