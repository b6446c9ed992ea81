// `pstrain experiment`: the same job once per consistency mode (and
// repeat) on a local cluster, compared (experiment/runner.h runs them).
// Afterwards it writes, under <output_dir>/experiment/:
//   runs.csv     every evaluation of every run: mode, repeat, global step,
//                wall time, eval loss and accuracy, the run's staleness
//   summary.md   per mode, medians over repeats: time to reach --target
//                accuracy, final accuracy, ms per step of replica 0,
//                examples/s, dropped gradients, mean and p99 staleness
//   accuracy_vs_time.png, accuracy_vs_examples.png, staleness.png (gnuplot)
#ifndef PSTRAIN_CLI_EXPERIMENT_H_
#define PSTRAIN_CLI_EXPERIMENT_H_

#include <string>

#include "base/cli_args.h"

namespace pstrain {

// `pstrain experiment --config FILE --modes M1,M2,... --workers N --ps M
// [--straggler TASK:MS[@P]] [--repeats R] [--target ACC] [--output_dir DIR]
// [job flags]`. Returns the exit code: 2 for bad flags, 1 when a run
// fails or the plots cannot be drawn.
int ExperimentMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_EXPERIMENT_H_
