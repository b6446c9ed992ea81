// worker: runs the worker task named by TF_CONFIG; only that role is linked in.
#include <cstdlib>
#include <memory>
#include <utility>

#include "common/crash_handler.h"
#include "job/task_main.h"
#include "worker/worker_main.h"

int main(int argc, char** argv) {
  pstrain::InstallCrashHandler(argv[0]);
  return pstrain::RunTask(std::getenv("TF_CONFIG"), argc, argv, 1, pstrain::Role::kWorker,
                          [](const pstrain::TfConfig& cfg, pstrain::CliArgs& args,
                             std::shared_ptr<const pstrain::Security> security) {
                            return pstrain::worker::WorkerMain(cfg, args, std::move(security));
                          });
}
