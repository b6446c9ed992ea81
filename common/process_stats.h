// Facts about a running process, read from /proc.
#ifndef PSTRAIN_COMMON_PROCESS_STATS_H_
#define PSTRAIN_COMMON_PROCESS_STATS_H_

#include <cstdint>
#include <sys/types.h>

#include "absl/status/statusor.h"

namespace pstrain {

// Resident memory (VmRSS) of `pid`, or of this process when pid is 0.
// NotFound when the process does not exist.
absl::StatusOr<int64_t> ResidentBytes(pid_t pid = 0);

// CPU time (user + system) `pid` has used so far, or this process when pid
// is 0. NotFound when the process does not exist.
absl::StatusOr<double> CpuSeconds(pid_t pid = 0);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PROCESS_STATS_H_
