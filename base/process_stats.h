// Facts about a running process, read from /proc.
#ifndef PSTRAIN_BASE_PROCESS_STATS_H_
#define PSTRAIN_BASE_PROCESS_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// Resident memory (VmRSS) of `pid`, or of this process when pid is 0.
// NotFound when the process does not exist.
absl::StatusOr<int64_t> ResidentBytes(pid_t pid = 0);

// CPU time (user + system) `pid` has used so far, or this process when pid
// is 0. NotFound when the process does not exist.
absl::StatusOr<double> CpuSeconds(pid_t pid = 0);

// Threads of `pid` now, or of this process when pid is 0. NotFound when
// the process does not exist.
absl::StatusOr<int> ThreadCount(pid_t pid = 0);

// Minor page faults `pid` has taken so far (pages the kernel mapped in,
// zeroed or from the page cache), or this process's when pid is 0.
// NotFound when the process does not exist.
absl::StatusOr<int64_t> MinorFaults(pid_t pid = 0);

// TCP connections this process holds open to any of `ports` on the
// loopback or another host (its sockets matched against /proc/net/tcp and
// tcp6, established ones only).
absl::StatusOr<int> TcpConnectionsTo(const std::vector<int>& ports);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_PROCESS_STATS_H_
