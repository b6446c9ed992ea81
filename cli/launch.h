// `pstrain launch`: a whole cluster on this machine, on loopback.
//
// Picks free ports on 127.0.0.1, writes each task's TF_CONFIG, starts every
// task as a child process running this same binary (PS first, then the
// chief, then the workers), one log per task under <output_dir>/logs/, and
// prints a line per task as it starts and as it ends. When every task has
// ended it prints the chief's final test accuracy. If a task fails, the
// others are stopped (SIGTERM, then SIGKILL after 5 s) and launch exits with
// that task's code. SIGINT/SIGTERM stop every task the same way.
#ifndef PSTRAIN_CLI_LAUNCH_H_
#define PSTRAIN_CLI_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/cli_args.h"

namespace pstrain {

struct LaunchOptions {
  std::string self_path;           // the pstrain binary to start for each task
  int num_ps = 2;
  int num_workers = 2;
  bool with_chief = true;          // false: worker 0 takes the chief's duties
  // An evaluator task that scores each checkpoint as it appears.
  bool with_evaluator = false;
  int eval_poll_secs = 2;          // how often the evaluator looks for checkpoints
  std::string output_dir = "./output";
  // Flags passed to the chief and every worker (the job flags).
  std::vector<std::string> job_flags;
  // Flags passed to every task, the PS included: the security flags
  // (job/security_flags.h) and --config when it is given. PSTRAIN_TOKEN,
  // like the rest of the environment, is inherited.
  std::vector<std::string> task_flags;
  // --timeout_s: every task is stopped after this long (exit 138). Zero
  // (the default): no bound.
  absl::Duration timeout = absl::ZeroDuration();
};

// Runs the cluster to completion. Returns the exit code for the process.
int RunLaunch(const LaunchOptions& options);

// Parses `pstrain launch` flags (argv after "launch"): --ps, --workers,
// --chief / --nochief, --evaluator, --eval_poll_secs, --output_dir, --timeout_s,
// and the job flags, which it
// checks here so that a typo fails before any task starts. Prints the error
// and returns 2 on bad flags, otherwise runs the launch.
int LaunchMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_LAUNCH_H_
