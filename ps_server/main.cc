// ps_server: runs the ps task named by TF_CONFIG; only that role is linked in.
#include "job/task_main.h"
#include "ps_server/ps_main.h"

int main(int argc, char** argv) {
  return pstrain::RoleBinaryMain(argc, argv, pstrain::Role::kPs, pstrain::ps::PsMain);
}
