// One thread that runs the tasks it is given, one at a time, in the order
// given: work that must not hold a caller's thread (a gRPC callback thread,
// say) and must not overlap itself. The destructor runs the tasks still
// queued, then joins the thread. Thread-safe.
#ifndef PSTRAIN_BASE_SERIAL_WORKER_H_
#define PSTRAIN_BASE_SERIAL_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

class SerialWorker {
 public:
  SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  ~SerialWorker();

  // Queues `task`; returns at once.
  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_BASE_SERIAL_WORKER_H_
