// chief: runs the chief (or master) task named by TF_CONFIG; only that role is linked in.
#include <cstdlib>
#include <memory>
#include <utility>

#include "chief/chief_main.h"
#include "common/crash_handler.h"
#include "job/task_main.h"

int main(int argc, char** argv) {
  pstrain::InstallCrashHandler(argv[0]);
  return pstrain::RunTask(std::getenv("TF_CONFIG"), argc, argv, 1, pstrain::Role::kChief,
                          [](const pstrain::TfConfig& cfg, pstrain::CliArgs& args,
                             std::shared_ptr<const pstrain::Security> security) {
                            return pstrain::chief::ChiefMain(cfg, args, std::move(security));
                          });
}
