#include "job/task_main.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "base/crash_handler.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "job/chief_client.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "job/task_flags.h"

namespace pstrain {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  // TF_CONFIG, the flags, the security files: the configuration's.
  return RoleExitCode(s, FailureKind::kBadConfig);
}

// A worker or PS whose TF_CONFIG names a cluster it is not in (started
// under an index the cluster does not have): the job would wait for the
// task that should have started in its place. Tells the task with chief
// duties, which fails the job with exit 2 at once, then fails itself.
int FailOutsideCluster(const TfConfig& cfg, const absl::Status& why, int argc, char** argv,
                       int first) {
  const int code = Fail(why);
  std::optional<HostPort> chief = cfg.coordinator_address();
  if (!chief.has_value() || (cfg.task.role != Role::kWorker && cfg.task.role != Role::kPs)) {
    return code;
  }
  auto args = CliArgs::Parse(argc, argv, first);
  if (!args.ok()) return code;
  auto security = SecurityFromFlags(*args);
  if (!security.ok()) return code;
  SetLogTag(cfg.task.ToString());
  Log("telling the job's chief (", chief->ToString(), ") that ", cfg.task.ToString(),
      " cannot take part");
  ReportFailureToChief(*chief, cfg.task, why, code, **security, absl::Seconds(20));
  return code;
}

}  // namespace

int RunTask(const char* tf_config, int argc, char** argv, int first, std::optional<Role> expected,
            const RoleMain& role_main) {
  if (tf_config == nullptr) {
    return Fail(absl::InvalidArgumentError(
        "TF_CONFIG is not set: it names this task's role and the cluster "
        "(see `pstrain help`)"));
  }
  auto cfg = ParseTfConfig(tf_config);
  if (!cfg.ok()) {
    if (std::optional<TfConfig> outside = TaskOutsideItsCluster(tf_config)) {
      return FailOutsideCluster(*outside, cfg.status(), argc, argv, first);
    }
    return Fail(cfg.status());
  }
  if (expected.has_value() && cfg->task.role != *expected) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG task.type is \"", RoleName(cfg->task.role), "\" but this binary runs the ",
        RoleName(*expected), " role; use `pstrain` to run any role")));
  }
  auto args = CliArgs::Parse(argc, argv, first);
  if (!args.ok()) return Fail(args.status());
  SetLogTag(cfg->task.ToString());
  // First, so that relative paths resolve in --work_dir and every line
  // goes where the platform collects it.
  auto platform = PlatformFlagsFromArgs(*args);
  if (!platform.ok()) return Fail(platform.status());
  if (absl::Status applied = ApplyPlatformFlags(*platform, cfg->task); !applied.ok()) {
    return Fail(applied);
  }
  auto security = SecurityFromFlags(*args);
  if (!security.ok()) return Fail(security.status());
  auto bind = args->GetString("bind", "");
  if (!bind.ok()) return Fail(bind.status());
  if (absl::Status exposed = CheckExposure(cfg->cluster, *bind, **security); !exposed.ok()) {
    return Fail(exposed);
  }
  if ((*security)->insecure() && !(*security)->tls() && !(*security)->has_token()) {
    Log("--insecure: no TLS and no cluster token; anyone who reaches this task's port can "
        "read and change the model");
  }
  return role_main(*cfg, *args, *security);
}

int RoleBinaryMain(int argc, char** argv, Role role, const RoleMain& role_main) {
  const std::string binary = std::filesystem::path(argv[0]).filename().string();
  // --version (-V) and --help (-h) anywhere before "--", as `pstrain` takes
  // them: answered before TF_CONFIG is read.
  if (AsksForVersion(argc, argv, 1)) {
    std::printf("%s: the %s role of pstrain %s\ncommit: %s (%s tree)\nbuild: %s\n", binary.c_str(),
                RoleName(role), kPstrainVersion, BuildCommit(), BuildTree(), BuildMode());
    return kExitOk;
  }
  if (AsksForHelp(argc, argv, 1)) {
    std::printf(
        "usage: TF_CONFIG='{\"cluster\": {...}, \"task\": {\"type\": \"%s\", \"index\": N}}' "
        "%s [flags]\n  runs the %s task TF_CONFIG names (`pstrain` runs any role; `pstrain "
        "help flags` describes every flag)\n\n%s\n%s",
        RoleName(role), binary.c_str(), RoleName(role), JobFlagsUsage().c_str(),
        TaskFlagUsage().c_str());
    return kExitOk;
  }
  InstallCrashHandler(argv[0]);
  return RunTask(std::getenv("TF_CONFIG"), argc, argv, 1, role, role_main);
}

}  // namespace pstrain
