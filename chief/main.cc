// chief: runs the chief (or master) task named by TF_CONFIG.
#include "cli/role_main.h"

int main(int argc, char** argv) {
  return pstrain::RunRoleFromEnvironment(argc, argv, pstrain::Role::kChief);
}
