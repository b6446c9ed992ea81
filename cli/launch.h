// `pstrain launch`: a whole cluster on this machine, on loopback
// (launcher/local_cluster.h runs it).
#ifndef PSTRAIN_CLI_LAUNCH_H_
#define PSTRAIN_CLI_LAUNCH_H_

#include <string>

#include "base/cli_args.h"

namespace pstrain {

// Parses `pstrain launch` flags (argv after "launch"): --ps, --workers,
// --chief / --nochief, --evaluator, --eval_poll_secs, --output_dir,
// --timeout_s, and the job flags, which it checks here so that a typo
// fails before any task starts. Prints the error and returns 2 on bad
// flags, otherwise runs the launch and returns RunLaunch's code.
int LaunchMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_LAUNCH_H_
