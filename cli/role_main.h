// Runs the task that TF_CONFIG names: the one entry point behind `pstrain`
// (no subcommand) and the per-role binaries ps_server, worker, chief.
#ifndef PSTRAIN_CLI_ROLE_MAIN_H_
#define PSTRAIN_CLI_ROLE_MAIN_H_

#include <optional>

#include "common/tf_config.h"

namespace pstrain {

// Reads the TF_CONFIG environment variable, validates it, and runs the
// task's role with the flags in argv[first..argc). When `expected` is set
// (a per-role binary), a TF_CONFIG naming another role is an error. Bad
// TF_CONFIG or flags print one line naming the problem and return 2.
// Returns the process exit code.
int RunRoleFromEnvironment(int argc, char** argv, std::optional<Role> expected,
                           int first = 1);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_ROLE_MAIN_H_
