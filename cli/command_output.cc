#include "cli/command_output.h"

#include <cstdio>

#include "base/exit_codes.h"

namespace pstrain {

int FailCommand(absl::string_view cmd, const absl::Status& s) {
  std::fprintf(stderr, "pstrain %s: %s\n", std::string(cmd).c_str(),
               std::string(s.message()).c_str());
  return CommandExitCode(s);
}

int FinishCommand(absl::string_view cmd, const absl::StatusOr<std::string>& out) {
  if (!out.ok()) return FailCommand(cmd, out.status());
  std::fputs(out->c_str(), stdout);
  return kExitOk;
}

}  // namespace pstrain
