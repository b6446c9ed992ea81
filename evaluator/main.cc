// evaluator: runs the evaluator task named by TF_CONFIG; only that role is linked in.
#include <memory>

#include "evaluator/evaluator_main.h"
#include "job/task_main.h"

int main(int argc, char** argv) {
  // The evaluator reads checkpoints from disk and talks to no task.
  return pstrain::RoleBinaryMain(argc, argv, pstrain::Role::kEvaluator,
                                 [](const pstrain::TfConfig& cfg, pstrain::CliArgs& args,
                                    std::shared_ptr<const pstrain::Security>) {
                                   return pstrain::evaluator::EvaluatorMain(cfg, args);
                                 });
}
