// Runs the task that TF_CONFIG names, whatever its role: `pstrain` with no
// subcommand. The only place besides cli/main.cc that knows every role.
#ifndef PSTRAIN_CLI_ROLE_MAIN_H_
#define PSTRAIN_CLI_ROLE_MAIN_H_

namespace pstrain {

// RunTask (job/task_main.h) with the role's main chosen by TF_CONFIG's
// task.type; `tf_config` is the environment variable's value or nullptr.
// Returns the process exit code.
int RunAnyRole(const char* tf_config, int argc, char** argv);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_ROLE_MAIN_H_
