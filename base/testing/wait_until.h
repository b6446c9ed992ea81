// Waits for something a test expects to happen, in real time: polls
// `ready` every 5 ms until it holds (true) or `timeout` passes (false).
// For positive expectations only; that something did not happen is shown
// on a fake clock (base/testing/fake_clock.h), not by waiting. testonly.
#ifndef PSTRAIN_BASE_TESTING_WAIT_UNTIL_H_
#define PSTRAIN_BASE_TESTING_WAIT_UNTIL_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain::testing {

inline bool WaitUntil(const std::function<bool()>& ready,
                      absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace pstrain::testing

#endif  // PSTRAIN_BASE_TESTING_WAIT_UNTIL_H_
