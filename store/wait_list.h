// Requests that cannot be served yet (a sync pull waiting for the step to
// complete, an ssp pull waiting for the slowest replica) park here instead of
// blocking a gRPC thread. Whoever makes progress calls Notify(); every parked
// attempt is then retried on the notifier's thread. An attempt that is still
// waiting at its deadline is expired on the list's own timer thread.
//
// Thread-safe. No lost wake-ups: an attempt that fails concurrently with a
// Notify() is retried.
#ifndef PSTRAIN_STORE_WAIT_LIST_H_
#define PSTRAIN_STORE_WAIT_LIST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace pstrain::ps {

class WaitList {
 public:
  // Deadlines are on `clock` (never null; must outlive the list); the
  // timer looks at them every 50 ms of real time.
  explicit WaitList(const Clock* clock = Clock::Real());
  // Expires every parked attempt, then stops the timer thread.
  ~WaitList();
  WaitList(const WaitList&) = delete;
  WaitList& operator=(const WaitList&) = delete;

  // Runs attempt() now; if it returns false, again after each Notify() until
  // it returns true. If `deadline` passes first, expire() runs once instead
  // and attempt() never again. Both run without the list's lock held.
  void RunWhenReady(std::function<bool()> attempt, absl::Time deadline,
                    std::function<void()> expire) ABSL_LOCKS_EXCLUDED(mu_);

  // Something a parked attempt may wait for has changed.
  void Notify() ABSL_LOCKS_EXCLUDED(mu_);

  int parked() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    std::function<bool()> attempt;
    absl::Time deadline;
    std::function<void()> expire;
  };
  // Tries `w` until it succeeds or no Notify() raced with a failure, then
  // parks it.
  void TryOrPark(Waiter w) ABSL_LOCKS_EXCLUDED(mu_);
  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu_);

  const Clock* const clock_;
  std::atomic<uint64_t> epoch_{0};
  mutable absl::Mutex mu_;
  std::list<Waiter> parked_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_WAIT_LIST_H_
