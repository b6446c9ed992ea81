// The pstrain command: every role (from TF_CONFIG) and every tool
// (launch, describe, bench, ...), dispatched on the first argument.
#ifndef PSTRAIN_CLI_PSTRAIN_MAIN_H_
#define PSTRAIN_CLI_PSTRAIN_MAIN_H_

namespace pstrain {

// Runs the command `argv` names; returns the process's exit code
// (base/exit_codes.h). May execute the binary again first
// (model::UseTheCpusBlasKernels).
int PstrainMain(int argc, char** argv);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_PSTRAIN_MAIN_H_
