// ps_server: runs the ps task named by TF_CONFIG; only that role is linked in.
#include <cstdlib>
#include <memory>
#include <utility>

#include "common/crash_handler.h"
#include "job/task_main.h"
#include "ps_server/ps_main.h"

int main(int argc, char** argv) {
  pstrain::InstallCrashHandler(argv[0]);
  return pstrain::RunTask(std::getenv("TF_CONFIG"), argc, argv, 1, pstrain::Role::kPs,
                          [](const pstrain::TfConfig& cfg, pstrain::CliArgs& args,
                             std::shared_ptr<const pstrain::Security> security) {
                            return pstrain::ps::PsMain(cfg, args, std::move(security));
                          });
}
