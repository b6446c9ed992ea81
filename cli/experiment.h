// `pstrain experiment`: the same job once per consistency mode (and
// repeat) on a local cluster, compared. Main-layer code.
//
// Each run is a `pstrain launch` (a chief training as replica 0, the
// workers, the PS and an evaluator scoring a checkpoint every second) in
// <output_dir>/experiment/runs/<mode>-r<k>/. Afterwards it writes, under
// <output_dir>/experiment/:
//   runs.csv     every evaluation of every run: mode, repeat, global step,
//                wall time, eval loss and accuracy, the run's staleness
//   summary.md   per mode, medians over repeats: time to reach --target
//                accuracy, final accuracy, ms per step of replica 0,
//                examples/s, dropped gradients, mean and p99 staleness
//   accuracy_vs_time.png, accuracy_vs_step.png, staleness.png (gnuplot)
#ifndef PSTRAIN_CLI_EXPERIMENT_H_
#define PSTRAIN_CLI_EXPERIMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli_args.h"

namespace pstrain {

// A consistency mode as the experiment names it, and the job flags it sets.
struct ExperimentMode {
  std::string name;                // "sync+backup:1"
  std::string dir;                 // "sync_backup_1": a file-name-safe form
  std::vector<std::string> flags;  // "--consistency=sync", ...
};

// Parses "async", "sync", "sync+backup:K" (sync aggregating replicas - K
// gradients per step, K backups) and "ssp:S". InvalidArgument naming the
// mode for anything else or K out of 1..replicas-1.
absl::StatusOr<ExperimentMode> ParseExperimentMode(const std::string& mode, int replicas);

// Staleness from a PS histogram (buckets 0, 1, 2, 3-4, 5-8, ..., 65+):
// the mean, counting each bucket at its midpoint, and the bucket's upper
// bound at which 99% of the counts are reached.
struct StalenessSummary {
  double mean = 0;
  double p99 = 0;
};
StalenessSummary SummarizeStaleness(const std::vector<double>& histogram);

// `pstrain experiment --config FILE --modes M1,M2,... --workers N --ps M
// [--straggler TASK:MS[@P]] [--repeats R] [--target ACC] [--output_dir DIR]
// [job flags]`. Returns the exit code.
int ExperimentMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_EXPERIMENT_H_
