#include "job/task_flags.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "job/flag_table.h"

namespace pstrain {

absl::StatusOr<PlatformFlags> PlatformFlagsFromArgs(CliArgs& args) {
  PlatformFlags flags;
  PSTRAIN_ASSIGN_OR_RETURN(flags.work_dir, StringFlag(args, "work_dir"));
  PSTRAIN_ASSIGN_OR_RETURN(flags.log_dir, StringFlag(args, "log_dir"));
  PSTRAIN_ASSIGN_OR_RETURN(std::string log_to, StringFlag(args, "log_to"));
  if (log_to == "stderr") {
    flags.log_to = LogStream::kStderr;
  } else if (log_to == "stdout") {
    flags.log_to = LogStream::kStdout;
  } else if (log_to == "file") {
    flags.log_to = LogStream::kNone;
    if (flags.log_dir.empty()) {
      return absl::InvalidArgumentError(
          "--log_to=file needs --log_dir, the directory of the tasks' log files");
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_to=", log_to, ": must be stderr, stdout or file"));
  }
  return flags;
}

absl::Status ApplyPlatformFlags(const PlatformFlags& flags, const TaskId& task) {
  if (!flags.work_dir.empty() && ::chdir(flags.work_dir.c_str()) != 0) {
    return FileError("--work_dir: cannot change into", flags.work_dir);
  }
  std::string file;
  if (!flags.log_dir.empty()) {
    if (absl::Status made = MakeDirs(flags.log_dir); !made.ok()) {
      return absl::Status(made.code(), absl::StrCat("--log_dir: ", made.message()));
    }
    file = absl::StrCat(flags.log_dir, "/", RoleName(task.role), "-", task.index, ".log");
  }
  return SetLogDestination(flags.log_to, file);
}

const std::vector<std::string>& TaskFlagNames() {
  static const auto* names = [] {
    std::set<std::string> all;
    for (const FlagDef& f : FlagTable()) all.insert(f.name);
    return new std::vector<std::string>(all.begin(), all.end());
  }();
  return *names;
}

absl::Status CheckTaskFlags(const CliArgs& args, Role role) {
  std::vector<std::string> ignored;
  PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed(TaskFlagNames(), &ignored));
  if (!ignored.empty()) {
    Log("ignoring --", absl::StrJoin(ignored, ", --"), " (flags the ", RoleName(role),
        " does not use, accepted so that every task can share one argument list)");
  }
  return absl::OkStatus();
}

}  // namespace pstrain
