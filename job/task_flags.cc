#include "job/task_flags.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "job/job_flags.h"
#include "job/security_flags.h"

namespace pstrain {
namespace {

// Each role's own flags (beyond the job, security and platform flags).
const std::vector<std::string>& PsFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "bind", "max_message_mib", "max_calls_per_client", "max_calls", "max_tensors_per_request",
      "max_ids_per_request", "max_table_rows", "shared_memory", "tcp_frames", "stop_grace_secs"};
  return *names;
}

const std::vector<std::string>& TrainerFlagNames() {
  static const auto* names = new std::vector<std::string>{"bind", "ps_wait_s", "job_timeout_s",
                                                          "blas_threads", "eval_wait_secs"};
  return *names;
}

const std::vector<std::string>& EvaluatorFlagNames() {
  static const auto* names =
      new std::vector<std::string>{"eval_poll_secs", "once", "idle_timeout_s"};
  return *names;
}

const std::vector<std::string>& PlatformFlagNames() {
  static const auto* names =
      new std::vector<std::string>{"work_dir", "log_dir", "log_to", "num_gpus"};
  return *names;
}

}  // namespace

absl::StatusOr<PlatformFlags> PlatformFlagsFromArgs(CliArgs& args) {
  PlatformFlags flags;
  PSTRAIN_ASSIGN_OR_RETURN(flags.work_dir, args.GetString("work_dir", ""));
  PSTRAIN_ASSIGN_OR_RETURN(flags.log_dir, args.GetString("log_dir", ""));
  PSTRAIN_ASSIGN_OR_RETURN(std::string log_to, args.GetString("log_to", "stderr"));
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
    for (const std::vector<std::string>* part :
         {&JobFlagNames(), &SecurityFlagNames(), &PlatformFlagNames(), &PsFlagNames(),
          &TrainerFlagNames(), &EvaluatorFlagNames()}) {
      all.insert(part->begin(), part->end());
    }
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
