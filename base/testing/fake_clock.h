// A Clock (base/clock.h) whose time moves only when a test says so
// (Advance), and which counts the threads waiting on it, so that a test can
// see that a thread is blocked (waiters() rose) rather than sleep and hope.
// Waits poll the fake time every real millisecond. Thread-safe. testonly.
#ifndef PSTRAIN_BASE_TESTING_FAKE_CLOCK_H_
#define PSTRAIN_BASE_TESTING_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/clock.h"

namespace pstrain::testing {

class FakeClock final : public Clock {
 public:
  // Starts at a fixed, arbitrary time.
  FakeClock() = default;

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  // Threads in SleepFor or AwaitWithDeadline now, and waits begun so far.
  int waiters() const { return waiters_.load(std::memory_order_acquire); }
  int64_t waits_begun() const { return begun_.load(std::memory_order_acquire); }
  // Blocks (in real time, at most 10 s) until `n` waits have begun; false
  // if they never do.
  bool AwaitWaitsBegun(int64_t n) const {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (waits_begun() < n) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }
  // Blocks (in real time, at most 10 s) until `n` threads wait on this
  // clock; false if they never do.
  bool AwaitWaiters(int n) const {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (waiters() < n) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

  void SleepFor(absl::Duration d) const override {
    const absl::Time until = Now() + d;
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    begun_.fetch_add(1, std::memory_order_acq_rel);
    while (Now() < until) absl::SleepFor(absl::Milliseconds(1));
    waiters_.fetch_sub(1, std::memory_order_acq_rel);
  }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) const override {
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    begun_.fetch_add(1, std::memory_order_acq_rel);
    bool met = cond.Eval();
    while (!met && Now() < deadline) {
      met = mu->AwaitWithTimeout(cond, absl::Milliseconds(1));
    }
    waiters_.fetch_sub(1, std::memory_order_acq_rel);
    return met;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'700'000'000);
  mutable std::atomic<int> waiters_{0};
  mutable std::atomic<int64_t> begun_{0};
};

}  // namespace pstrain::testing

#endif  // PSTRAIN_BASE_TESTING_FAKE_CLOCK_H_
