// A whole cluster on this machine, on loopback: what `pstrain launch` runs
// (cli/launch.h parses its flags) and what `pstrain experiment` and
// `pstrain bench` run once per configuration.
//
// Picks free ports on 127.0.0.1, writes each task's TF_CONFIG, starts every
// task as a child process running the given binary (PS first, then the
// chief, then the workers), one log per task under <output_dir>/logs/, and
// prints a line per task as it starts and as it ends, with the training
// tasks' progress lines and the evaluator's scores as they arrive
// (launcher/task_logs.h). When every task has ended it prints the chief's
// final test accuracy. A worker or the evaluator that ends with a
// retryable code is started again (at most 3 times), as a platform's
// ExitCode restart policy would. If a task fails, the others are stopped
// (SIGTERM, then SIGKILL after 15 s) and RunLaunch returns that task's
// code. SIGINT/SIGTERM stop every task the same way.
#ifndef PSTRAIN_LAUNCHER_LOCAL_CLUSTER_H_
#define PSTRAIN_LAUNCHER_LOCAL_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pstrain {

struct LaunchOptions {
  std::string self_path;  // the pstrain binary to start for each task
  int num_ps = 2;
  int num_workers = 2;
  bool with_chief = true;  // false: worker 0 takes the chief's duties
  // An evaluator task that scores each checkpoint as it appears.
  bool with_evaluator = false;
  int eval_poll_secs = 2;  // how often the evaluator looks for checkpoints
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

// Runs the cluster to completion. Returns the exit code for the process:
// 0 when every task ended with 0 and the chief wrote its metrics; the
// failed task's code; 138 when ports or processes could not be had or the
// timeout passed; 128+N on signal N.
int RunLaunch(const LaunchOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCHER_LOCAL_CLUSTER_H_
