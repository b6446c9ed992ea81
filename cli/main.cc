// The pstrain binary (cli/pstrain_main.h).
#include "cli/pstrain_main.h"

int main(int argc, char** argv) { return pstrain::PstrainMain(argc, argv); }
