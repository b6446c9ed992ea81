// The plots of `pstrain experiment`, drawn by gnuplot (Debian's
// gnuplot-nox): accuracy against wall time and against examples trained
// (the first run of each mode), and the staleness histogram (every run of
// each mode), from CSV files under <dir>/data and the script <dir>/plots.gp.
#ifndef PSTRAIN_EXPERIMENT_PLOTS_H_
#define PSTRAIN_EXPERIMENT_PLOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiment/runs.h"

namespace pstrain::experiment {

// Writes the data files and the script under `dir`; the file errors.
absl::Status WritePlotFiles(const std::string& dir, const std::vector<ExperimentMode>& modes,
                            const std::vector<ExperimentRun>& runs);

// WritePlotFiles, then gnuplot draws accuracy_vs_time.png,
// accuracy_vs_examples.png and staleness.png in `dir`. FailedPrecondition
// naming the package when gnuplot is not installed (the files are then
// written all the same); Internal when it fails.
absl::Status Plot(const std::string& dir, const std::vector<ExperimentMode>& modes,
                  const std::vector<ExperimentRun>& runs);

}  // namespace pstrain::experiment

#endif  // PSTRAIN_EXPERIMENT_PLOTS_H_
