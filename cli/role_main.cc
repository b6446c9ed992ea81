#include "cli/role_main.h"

#include "chief/chief_main.h"
#include "base/exit_codes.h"
#include "evaluator/evaluator_main.h"
#include "job/task_main.h"
#include "ps_server/ps_main.h"
#include "worker/worker_main.h"

namespace pstrain {

int RunAnyRole(const char* tf_config, int argc, char** argv) {
  return RunTask(tf_config, argc, argv, 1, std::nullopt,
                 [](const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
                   switch (cfg.task.role) {
                     case Role::kPs:
                       return ps::PsMain(cfg, args, std::move(security));
                     case Role::kWorker:
                       return worker::WorkerMain(cfg, args, std::move(security));
                     case Role::kChief:
                       return chief::ChiefMain(cfg, args, std::move(security));
                     case Role::kEvaluator:
                       return evaluator::EvaluatorMain(cfg, args, std::move(security));
                   }
                   return kExitPermanent;
                 });
}

}  // namespace pstrain
