// Time as code that waits sees it, so that tests control it (tcmalloc
// passes a Clock for the same reason): the push hold's lease, the wait
// list's deadlines and the chief's loops read the time and wait through a
// Clock. Production passes Clock::Real(); tests a FakeClock
// (base/testing/fake_clock.h) whose time moves only when told, so that a
// test asserting that something did not happen needs no sleep.
// Implementations are thread-safe.
#ifndef PSTRAIN_BASE_CLOCK_H_
#define PSTRAIN_BASE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;
  // Sleeps until this clock has moved on by `d`.
  virtual void SleepFor(absl::Duration d) const = 0;
  // As absl::Mutex::AwaitWithDeadline with the deadline on this clock:
  // REQUIRES `mu` held; waits (releasing it meanwhile) until `cond` holds
  // or this clock reaches `deadline`; returns whether `cond` holds, with
  // `mu` held again.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) const = 0;
  // AwaitWithDeadline(mu, cond, Now() + timeout).
  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond,
                        absl::Duration timeout) const {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }

  // The system's clock (absl::Now); never null, never destroyed.
  static const Clock* Real();
};

}  // namespace pstrain

#endif  // PSTRAIN_BASE_CLOCK_H_
