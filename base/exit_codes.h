// Process exit codes that orchestrators (TFJob's ExitCode restart policy) can
// act on: 0 success, 1-127 permanent, 128-255 retryable.
#ifndef PSTRAIN_BASE_EXIT_CODES_H_
#define PSTRAIN_BASE_EXIT_CODES_H_

#include "absl/status/status.h"

namespace pstrain {

inline constexpr int kExitOk = 0;
// Any other permanent failure (a bug, bad data).
inline constexpr int kExitPermanent = 1;
// Bad configuration or command line (InvalidArgument).
inline constexpr int kExitBadConfig = 2;
// A peer was lost or a deadline passed; restarting may succeed.
inline constexpr int kExitRetryable = 138;

// Maps a final status to an exit code: OK -> 0; InvalidArgument, NotFound,
// FailedPrecondition -> 2; Unavailable, DeadlineExceeded, Aborted, Cancelled
// -> 138; everything else -> 1.
int ExitCodeFor(const absl::Status& s);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_EXIT_CODES_H_
