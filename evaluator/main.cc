// evaluator: runs the evaluator task named by TF_CONFIG; only that role is linked in.
#include <memory>

#include "evaluator/evaluator_main.h"
#include "job/task_main.h"

int main(int argc, char** argv) {
  return pstrain::RoleBinaryMain(argc, argv, pstrain::Role::kEvaluator,
                                 pstrain::evaluator::EvaluatorMain);
}
