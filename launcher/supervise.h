// One task kept running in its container: `pstrain supervise --restarts=N
// -- TASK FLAGS...` runs this binary with TASK FLAGS as a child and
// restarts it in place when it exits with a retryable code (128-255: a peer
// lost, a deadline passed, killed by a signal: base/exit_codes.h), at most
// N times, waiting 1, 2, 4, ... s (at most 30 s) before each restart. A
// permanent code (1-127: bad configuration or data) or 0 ends it with that
// code at once. For container engines whose restart policy cannot tell
// codes apart: compose's `on-failure` restarts a misspelt flag as readily
// as a lost peer, where TFJob's `ExitCode` policy and this do not.
// SIGTERM and SIGINT are passed on to the task, which is then not
// restarted: a stop ends the container with the task's own exit code.
// Thread-compatible; one supervisor per process (it reaps its children).
#ifndef PSTRAIN_LAUNCHER_SUPERVISE_H_
#define PSTRAIN_LAUNCHER_SUPERVISE_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pstrain {

struct SuperviseOptions {
  // The task: argv[0] is the program path.
  std::vector<std::string> argv;
  // Restarts allowed after retryable exits, over the supervisor's life.
  int restarts = 3;
  // The wait before the first restart; doubled for each after it, up to
  // `max_backoff`.
  absl::Duration first_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  // Set to a signal number (by the caller's signal handler) to pass it on
  // to the task and end without a restart. Null: no signals are watched.
  const std::atomic<int>* stop = nullptr;
  // Each decision, one line ("exit 138 (retryable): restart 1
  // of 3 in 1s").
  std::function<void(absl::string_view)> log;
};

// Runs the task until it ends for good, as above; returns the exit code to
// end with (the task's last, or 127 when it cannot be started).
int Supervise(const SuperviseOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCHER_SUPERVISE_H_
