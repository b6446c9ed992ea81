// The flags a cluster task accepts, whatever its role. Platforms start every
// task of a job with one argument list (UAI Train's one entrypoint, AI
// Platform's submitted arguments, a TFJob's shared pod template), so each
// role accepts the flags of every other role and the platforms' own
// (--work_dir, --log_dir, --log_to, --num_gpus), uses what it needs, says in
// its log which it ignores, and still refuses a flag no role knows (a typo),
// suggesting the nearest real one. Main-layer code only.
#ifndef PSTRAIN_JOB_TASK_FLAGS_H_
#define PSTRAIN_JOB_TASK_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cli_args.h"
#include "base/logging.h"
#include "cluster/tf_config.h"

namespace pstrain {

// The flags of the platforms, read by every task before its role runs.
struct PlatformFlags {
  // --work_dir: the task changes into it first, so relative paths in the
  // other flags resolve there (UAI Train's code directory). "" = stay.
  std::string work_dir;
  // --log_dir: each task also appends its log lines to
  // <log_dir>/<type>-<index>.log. "" = no file.
  std::string log_dir;
  // --log_to: stderr (default), stdout (platforms that collect a task's
  // stdout, UAI Train), or file (only <log_dir>'s file).
  LogStream log_to = LogStream::kStderr;
};

// Reads --work_dir, --log_dir and --log_to. InvalidArgument for a --log_to
// other than stderr, stdout or file, or --log_to=file without --log_dir.
absl::StatusOr<PlatformFlags> PlatformFlagsFromArgs(CliArgs& args);

// Changes into work_dir and points the log where the flags say, for `task`.
// Call from main before any other thread starts. Errors name the flag and
// the directory or file (NotFound, PermissionDenied, ...).
absl::Status ApplyPlatformFlags(const PlatformFlags& flags, const TaskId& task);

// Every flag some role's task reads: the job flags (job/job_flags.h), the
// security flags, the platform flags, and each role's own.
const std::vector<std::string>& TaskFlagNames();

// After `role`'s main has read its flags: a flag given that it did not read
// is refused when no role knows it (InvalidArgument "unknown flag --epoch
// (did you mean --epochs?)"), and otherwise named in one log line as
// ignored by this role.
absl::Status CheckTaskFlags(const CliArgs& args, Role role);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_TASK_FLAGS_H_
