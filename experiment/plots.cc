#include "experiment/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/subprocess.h"
#include "cluster/staleness.h"

namespace pstrain::experiment {
namespace {

std::string GnuplotPath() {
  for (const char* p : {"/usr/bin/gnuplot", "/usr/local/bin/gnuplot"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// Each run of `mode`'s staleness histogram summed, as shares of the total.
std::vector<double> StalenessShares(const std::string& mode,
                                    const std::vector<ExperimentRun>& runs) {
  std::vector<double> f;
  double total = 0;
  for (const ExperimentRun& r : runs) {
    if (r.mode != mode) continue;
    f.resize(std::max(f.size(), r.staleness.size()));
    for (size_t b = 0; b < r.staleness.size(); ++b) {
      f[b] += r.staleness[b];
      total += r.staleness[b];
    }
  }
  for (double& v : f) v = total > 0 ? v / total : 0;
  return f;
}

// The gnuplot script: the two accuracy plots (curves `time_plot` and
// `step_plot`, the axis from `y_from`) and the histogram `hist_plot`.
std::string PlotScript(const std::string& dir, double y_from, const std::string& time_plot,
                       const std::string& step_plot, const std::string& hist_plot) {
  return absl::StrCat(
      "set terminal pngcairo size 960,600\n"
      "set datafile separator \",\"\n"
      "set grid\n"
      "set key bottom right\n"
      "set ylabel \"test accuracy\"\n"
      "set yrange [",
      absl::StrFormat("%.2f", y_from), ":*]\n", "set output \"", dir, "/accuracy_vs_time.png\"\n",
      "set title \"Test accuracy against wall time\"\n"
      "set xlabel \"wall time since launch (s)\"\n"
      "plot ",
      time_plot, "\n", "set output \"", dir, "/accuracy_vs_examples.png\"\n",
      "set title \"Test accuracy against training examples processed\"\n"
      "set xlabel \"training examples (every replica's)\"\n"
      "plot ",
      step_plot, "\n", "set output \"", dir, "/staleness.png\"\n",
      "set title \"Staleness of applied gradients (log scale: the tail shows)\"\n"
      "set xlabel \"staleness (PS steps between the pull and the push)\"\n"
      "set ylabel \"share of applied gradients\"\n"
      "set key top right\n"
      "set style data histograms\n"
      "set style histogram clustered\n"
      "set style fill solid 0.8 border -1\n"
      "set logscale y\n"
      "set yrange [0.0001:1]\n"
      "plot ",
      hist_plot, "\n");
}

}  // namespace

absl::Status WritePlotFiles(const std::string& dir, const std::vector<ExperimentMode>& modes,
                            const std::vector<ExperimentRun>& runs) {
  const std::string data = dir + "/data";
  if (absl::Status s = MakeDirs(data); !s.ok()) return s;
  std::string time_plot, step_plot;
  // The accuracy axis starts near the lowest final accuracy, so that the
  // range where the modes differ is not squeezed by the first evaluations.
  double lowest_final = 1;
  for (const ExperimentRun& r : runs) lowest_final = std::min(lowest_final, r.test_accuracy);
  const double y_from = std::max(0.0, std::floor((lowest_final - 0.05) * 100) / 100);
  std::vector<std::string> plotted;
  std::map<std::string, std::vector<double>> staleness;  // mode -> shares
  for (const ExperimentMode& spec : modes) {
    auto first = std::find_if(runs.begin(), runs.end(),
                              [&](const ExperimentRun& r) { return r.mode == spec.name; });
    if (first == runs.end()) continue;
    std::string rows;
    // Columns: wall time, global step, accuracy, loss, examples trained.
    for (const EvalPoint& p : first->evals) {
      absl::StrAppendFormat(&rows, "%.3f,%d,%.5f,%.5f,%.0f\n", p.wall_s, p.step, p.accuracy, p.loss,
                            p.step * first->examples_per_step);
    }
    const std::string file = absl::StrCat(data, "/", spec.dir, ".csv");
    if (absl::Status s = WriteFileAtomically(file, rows); !s.ok()) return s;
    absl::StrAppend(&time_plot, time_plot.empty() ? "" : ", ", "\"", file,
                    "\" using 1:3 with linespoints title \"", spec.name, "\"");
    absl::StrAppend(&step_plot, step_plot.empty() ? "" : ", ", "\"", file,
                    "\" using 5:3 with linespoints title \"", spec.name, "\"");
    staleness[spec.name] = StalenessShares(spec.name, runs);
  }
  std::string hist = "# bucket";
  for (const ExperimentMode& m : modes) absl::StrAppend(&hist, ",", m.name);
  hist += "\n";
  for (int b = 0; b < kStalenessBuckets; ++b) {
    absl::StrAppend(&hist, StalenessBucketName(b));
    for (const ExperimentMode& m : modes) {
      const std::vector<double>& f = staleness[m.name];
      absl::StrAppendFormat(&hist, ",%.5f", b < static_cast<int>(f.size()) ? f[b] : 0.0);
    }
    hist += "\n";
  }
  if (absl::Status s = WriteFileAtomically(data + "/staleness.csv", hist); !s.ok()) return s;
  std::string hist_plot;
  for (size_t m = 0; m < modes.size(); ++m) {
    absl::StrAppend(&hist_plot, m == 0 ? absl::StrCat("\"", data, "/staleness.csv\"") : ", \"\"",
                    " using ", m + 2, m == 0 ? ":xtic(1)" : "", " title \"", modes[m].name, "\"");
  }
  return WriteFileAtomically(dir + "/plots.gp",
                             PlotScript(dir, y_from, time_plot, step_plot, hist_plot));
}

absl::Status Plot(const std::string& dir, const std::vector<ExperimentMode>& modes,
                  const std::vector<ExperimentRun>& runs) {
  if (absl::Status s = WritePlotFiles(dir, modes, runs); !s.ok()) return s;
  const std::string gnuplot = GnuplotPath();
  if (gnuplot.empty()) {
    return absl::FailedPreconditionError(
        "gnuplot is not installed (Debian package gnuplot-nox; deploy/install_deps.sh installs "
        "it): the plots' data and script are in " +
        dir);
  }
  SpawnOptions o;
  o.argv = {gnuplot, dir + "/plots.gp"};
  o.log_path = dir + "/gnuplot.log";
  auto pid = Spawn(o);
  if (!pid.ok()) return pid.status();
  auto e = WaitChild(*pid, absl::Minutes(1));
  if (!e.has_value() || e->code != 0) {
    if (!e.has_value()) SignalChild(*pid, 9);
    return absl::InternalError(absl::StrCat("gnuplot failed; see ", o.log_path));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::experiment
