// `pstrain experiment`'s runs: the same job once per consistency mode and
// repeat, each a local cluster (launcher/local_cluster.h: a chief training
// as replica 0, the workers, the PS and an evaluator scoring a checkpoint
// every second) in <dir>/runs/<mode>-r<k>/, read back when it ends.
#ifndef PSTRAIN_EXPERIMENT_RUNNER_H_
#define PSTRAIN_EXPERIMENT_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "experiment/runs.h"

namespace pstrain::experiment {

struct ExperimentOptions {
  std::string pstrain_path;  // the binary each task runs
  std::vector<ExperimentMode> modes;
  int num_ps = 1;
  int num_workers = 2;
  int repeats = 1;
  double target = 0.80;  // the accuracy whose time each run reports
  int eval_poll_secs = 1;
  // Job flags every run gets (its mode's flags follow them).
  std::vector<std::string> job_flags;
  std::string dir;  // <output_dir>/experiment
  absl::Duration run_timeout = absl::Minutes(30);
};

// Runs every mode `repeats` times (repeat by repeat, the modes in order),
// each in a fresh directory. Internal naming the mode, the repeat and the
// logs when a run fails; ReadRun's errors when one left no metrics.
absl::StatusOr<std::vector<ExperimentRun>> RunExperiment(const ExperimentOptions& options);

}  // namespace pstrain::experiment

#endif  // PSTRAIN_EXPERIMENT_RUNNER_H_
