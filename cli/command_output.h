// How a `pstrain` command that computes its whole answer first ends: the
// answer on stdout and exit 0, or "pstrain CMD: <message>" on stderr and
// the status's exit code (base/exit_codes.h). Stateless; thread-safe.
#ifndef PSTRAIN_CLI_COMMAND_OUTPUT_H_
#define PSTRAIN_CLI_COMMAND_OUTPUT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Prints "pstrain <cmd>: <message>" to stderr; returns CommandExitCode(s).
int FailCommand(absl::string_view cmd, const absl::Status& s);

// Prints `out` to stdout and returns 0, or FailCommand(cmd, its status).
int FinishCommand(absl::string_view cmd, const absl::StatusOr<std::string>& out);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_COMMAND_OUTPUT_H_
