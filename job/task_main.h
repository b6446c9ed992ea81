// What every task does before its role runs, the same in `pstrain` and in
// the per-role binaries (ps_server, worker, chief, evaluator): parse
// TF_CONFIG, check the task's role, parse the flags, apply the platform
// flags (job/task_flags.h: --work_dir, --log_dir, --log_to), read the security flags,
// refuse to expose an insecure task beyond loopback, and tag the log with
// the task's name. A worker or PS whose task is not in the cluster its
// TF_CONFIG names (an index out of range) tells the job's chief before it
// exits 2, so that the job fails rather than waits (job/chief_client.h).
#ifndef PSTRAIN_JOB_TASK_MAIN_H_
#define PSTRAIN_JOB_TASK_MAIN_H_

#include <functional>
#include <memory>
#include <optional>

#include "base/cli_args.h"
#include "transport/security.h"
#include "cluster/tf_config.h"

namespace pstrain {

// A role's main: returns the process exit code (base/exit_codes.h).
using RoleMain = std::function<int(const TfConfig& cfg, CliArgs& args,
                                   std::shared_ptr<const Security> security)>;

// Runs `role_main` for the task that `tf_config` (the TF_CONFIG environment
// variable's value; nullptr when it is not set) names, with the flags in
// argv[first..argc). When `expected` is set (a per-role binary), a TF_CONFIG
// naming another role is an error. Bad TF_CONFIG or flags print one line
// naming the problem and return its exit code.
int RunTask(const char* tf_config, int argc, char** argv, int first, std::optional<Role> expected,
            const RoleMain& role_main);

// The whole main of a per-role binary (ps_server, worker, chief,
// evaluator): installs the crash handler (base/crash_handler.h), then
// RunTask with the TF_CONFIG environment variable, `role` expected.
int RoleBinaryMain(int argc, char** argv, Role role, const RoleMain& role_main);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_TASK_MAIN_H_
