// chief: runs the chief (or master) task named by TF_CONFIG; only that role is linked in.
#include "chief/chief_main.h"
#include "job/task_main.h"

int main(int argc, char** argv) {
  return pstrain::RoleBinaryMain(argc, argv, pstrain::Role::kChief, pstrain::chief::ChiefMain);
}
