// evaluator: runs the evaluator task named by TF_CONFIG; only that role is linked in.
#include <cstdlib>
#include <memory>
#include <utility>

#include "common/crash_handler.h"
#include "evaluator/evaluator_main.h"
#include "job/task_main.h"

int main(int argc, char** argv) {
  pstrain::InstallCrashHandler(argv[0]);
  return pstrain::RunTask(std::getenv("TF_CONFIG"), argc, argv, 1, pstrain::Role::kEvaluator,
                          [](const pstrain::TfConfig& cfg, pstrain::CliArgs& args,
                             std::shared_ptr<const pstrain::Security>) {
                            return pstrain::evaluator::EvaluatorMain(cfg, args);
                          });
}
