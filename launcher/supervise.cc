#include "launcher/supervise.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/exit_codes.h"
#include "base/subprocess.h"

namespace pstrain {
namespace {

bool Retryable(int code) { return code >= 128 && code <= 255; }

}  // namespace

int Supervise(const SuperviseOptions& options) {
  auto log = [&options](absl::string_view line) {
    if (options.log) options.log(line);
  };
  auto stopping = [&options] { return options.stop != nullptr ? options.stop->load() : 0; };
  absl::Duration backoff = options.first_backoff;
  for (int restarts = 0;; ++restarts) {
    SpawnOptions spawn;
    spawn.argv = options.argv;
    absl::StatusOr<pid_t> pid = Spawn(spawn);
    if (!pid.ok()) {
      log(absl::StrCat("cannot start the task: ", pid.status().message()));
      return 127;
    }
    // Wait for its end, passing a stop signal on once.
    int forwarded = 0;
    ChildExit exit;
    for (;;) {
      if (const int signo = stopping(); signo != 0 && forwarded == 0) {
        SignalChild(*pid, signo);
        forwarded = signo;
      }
      if (std::optional<ChildExit> e = WaitChild(*pid, absl::Milliseconds(100))) {
        exit = *e;
        break;
      }
    }
    const int code = exit.code;
    if (code == kExitOk) return code;
    if (forwarded != 0 || stopping() != 0) {
      log(absl::StrCat("the task exited ", code, " after signal ",
                       forwarded != 0 ? forwarded : stopping(), ": not restarted"));
      return code;
    }
    if (!Retryable(code)) {
      log(absl::StrCat("exit ", code, " is permanent (bad configuration or data): not restarted"));
      return code;
    }
    if (restarts >= options.restarts) {
      log(absl::StrCat("exit ", code, " (retryable), and the ", options.restarts,
                       " restarts allowed are used up"));
      return code;
    }
    log(absl::StrCat("exit ", code, " (retryable): restart ", restarts + 1, " of ",
                     options.restarts, " in ", absl::FormatDuration(backoff)));
    // The wait, cut short by a stop.
    const absl::Time until = absl::Now() + backoff;
    while (absl::Now() < until && stopping() == 0) {
      absl::SleepFor(std::min(absl::Milliseconds(50), until - absl::Now()));
    }
    if (stopping() != 0) {
      log(absl::StrCat("signal ", stopping(), " while waiting: not restarted"));
      return code;
    }
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

}  // namespace pstrain
