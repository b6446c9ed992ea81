// Process exit codes that orchestrators (TFJob's ExitCode restart policy) can
// act on: 0 success, 1-127 permanent, 128-255 retryable.
//
// A task's code says what its failure means to whoever restarts it, and
// the task's role decides that from what it was doing (role mains:
// RoleExitCode), not from the status code a library happened to pick:
//   - a failure whose meaning is known where it happens carries its kind
//     (WithFailureKind): a join the chief refused is the configuration's,
//     a replica that lost its PS may be restarted;
//   - the transport's own transient codes (Unavailable, DeadlineExceeded,
//     Aborted, Cancelled: a peer lost, a deadline passed) are retryable;
//   - anything else takes the kind the role gives the phase it failed in:
//     before its work starts (flags, TF_CONFIG, configs, data files) the
//     configuration's, after that permanent.
// Commands (`pstrain inspect`, `launch`, ...) that are no role use
// CommandExitCode.
#ifndef PSTRAIN_BASE_EXIT_CODES_H_
#define PSTRAIN_BASE_EXIT_CODES_H_

#include <optional>

#include "absl/status/status.h"

namespace pstrain {

inline constexpr int kExitOk = 0;
// Any other permanent failure (a bug, bad data).
inline constexpr int kExitPermanent = 1;
// Bad configuration or command line.
inline constexpr int kExitBadConfig = 2;
// A peer was lost or a deadline passed; restarting may succeed.
inline constexpr int kExitRetryable = 138;

enum class FailureKind { kBadConfig, kPermanent, kRetryable };

// 2, 1, 138.
int ExitCodeOf(FailureKind kind);

// The kind an exit code stands for: 2 the configuration's, 128-255
// retryable, any other (1-127) permanent. What a task makes of a code
// another task ended with (a failure recorded in run.json, or told).
FailureKind FailureKindOfExitCode(int code);

// `s` marked as a failure of `kind` (a payload: it stays with the status
// through returns in this process, not over the wire). OK stays OK.
absl::Status WithFailureKind(absl::Status s, FailureKind kind);

// The kind `s` was marked with, if any.
std::optional<FailureKind> FailureKindOf(const absl::Status& s);

// `s` marked as the configuration's unless its code is a transient one:
// what a task makes of a failure before its work starts (reading its
// data, its model, the run it joins).
absl::Status AsSetupFailure(absl::Status s);

// A role's exit code for how it ended: 0 for OK; the kind `s` carries;
// 138 for the transport's transient codes; otherwise `unmarked`'s code
// (what the role makes of a failure in the phase it was in).
int RoleExitCode(const absl::Status& s, FailureKind unmarked);

// `s` marked with the kind of its RoleExitCode with `unmarked`, so that
// it keeps that code wherever it is passed on (a replica's own failure,
// once it has told the others what it ends with). OK stays OK.
absl::Status WithRoleKind(absl::Status s, FailureKind unmarked);

// A command's exit code: 0 for OK; the kind `s` carries; 2 for
// InvalidArgument, NotFound and FailedPrecondition (the command line or
// the files it names); 138 for the transient codes; 1 otherwise.
int CommandExitCode(const absl::Status& s);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_EXIT_CODES_H_
