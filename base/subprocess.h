// Starting and ending child processes by PID, for `pstrain launch` and the
// cluster tests. Never signals anything it did not start.
// Thread-compatible.
#ifndef PSTRAIN_BASE_SUBPROCESS_H_
#define PSTRAIN_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program path
  // Set (or replaced) in the child's environment; the rest is inherited.
  std::vector<std::pair<std::string, std::string>> env;
  // stdout and stderr go here (created or truncated); empty keeps ours.
  std::string log_path;
  // The child gets SIGKILL if this process dies, so no task outlives its
  // launcher even after a kill -9.
  bool die_with_parent = true;
};

// Forks and execs. Internal naming the program when fork fails or the log
// cannot be opened; an exec failure shows as exit code 127.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

struct ChildExit {
  pid_t pid = 0;
  // The exit status, or 128 + signal number when killed by a signal.
  int code = 0;
};

// Waits up to `timeout` for any child of this process to end.
std::optional<ChildExit> WaitAnyChild(absl::Duration timeout);

// Waits up to `timeout` for the given child to end.
std::optional<ChildExit> WaitChild(pid_t pid, absl::Duration timeout);

// Sends `signo` to `pid` (no-op for pid <= 0).
void SignalChild(pid_t pid, int signo);

// Stops children: SIGTERM to each, then SIGKILL to any still running when
// `grace` has passed (counted once for all), each reaped.
void StopChildren(const std::vector<pid_t>& pids, absl::Duration grace);

// Picks `n` distinct free TCP ports on 127.0.0.1 for tasks to bind later:
// at random below the kernel's ephemeral range (EphemeralPortRange), from
// 10000 up, so that no port the kernel picks for someone else in the
// meantime (a listener on port 0, an outgoing connection) is one of them;
// by binding port 0 when that range has no free port. Each is bound to
// check it is free, all held until every port is chosen, then closed.
absl::StatusOr<std::vector<int>> PickFreePorts(int n);

// The ports the kernel picks from (/proc/sys/net/ipv4/ip_local_port_range;
// Linux's default 32768-60999 when unreadable).
std::pair<int, int> EphemeralPortRange();

}  // namespace pstrain

#endif  // PSTRAIN_BASE_SUBPROCESS_H_
