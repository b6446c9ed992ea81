#include "cli/role_main.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "chief/chief_main.h"
#include "common/cli_args.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "evaluator/evaluator_main.h"
#include "ps_server/ps_main.h"
#include "worker/worker_main.h"

namespace pstrain {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return ExitCodeFor(s);
}

}  // namespace

int RunRoleFromEnvironment(int argc, char** argv, std::optional<Role> expected,
                           int first) {
  const char* env = std::getenv("TF_CONFIG");
  if (env == nullptr) {
    return Fail(absl::InvalidArgumentError(
        "TF_CONFIG is not set: it names this task's role and the cluster "
        "(see `pstrain help`)"));
  }
  auto cfg = ParseTfConfig(env);
  if (!cfg.ok()) return Fail(cfg.status());
  if (expected.has_value() && cfg->task.role != *expected) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG task.type is \"", RoleName(cfg->task.role), "\" but this binary runs the ",
        RoleName(*expected), " role; use `pstrain` to run any role")));
  }
  auto args = CliArgs::Parse(argc, argv, first);
  if (!args.ok()) return Fail(args.status());
  SetLogTag(cfg->task.ToString());
  switch (cfg->task.role) {
    case Role::kPs:
      return ps::PsMain(*cfg, *args);
    case Role::kWorker:
      return worker::WorkerMain(*cfg, *args);
    case Role::kChief:
      return chief::ChiefMain(*cfg, *args);
    case Role::kEvaluator:
      return evaluator::EvaluatorMain(*cfg, *args);
  }
  return kExitPermanent;
}

}  // namespace pstrain
