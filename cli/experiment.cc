#include "cli/experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/launch.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/median.h"
#include "cluster/staleness.h"
#include "base/subprocess.h"
#include "job/job_flags.h"

namespace pstrain {
namespace {

struct EvalPoint {
  double wall_s = 0;  // since the run started
  int64_t step = 0;
  double loss = 0;
  double accuracy = 0;
};

struct Run {
  std::string mode;
  int repeat = 0;
  std::vector<EvalPoint> evals;
  double seconds = 0;  // the launch, start to end
  double test_accuracy = 0;
  double examples_per_sec = 0;
  double ms_per_step = 0;  // replica 0's seconds over its steps
  double dropped = 0;
  std::vector<double> staleness;  // histogram
  double time_to_target = -1;     // -1: never reached
  // Training examples per global step (examples over global_step): a sync
  // step is every replica's batch, an async one a single replica's.
  double examples_per_step = 0;
};

// Reads what a finished run left in `dir`.
absl::Status ReadRun(const std::string& dir, double start_unix, double target, Run* run) {
  auto text = ReadFile(dir + "/final_metrics.json");
  if (!text.ok()) return text.status();
  auto metrics = ParseJson(*text);
  if (!metrics.ok()) return metrics.status();
  auto number = [&](const char* key) {
    const Json* v = FindMember(*metrics, key);
    return v != nullptr && v->is_number() ? v->get<double>() : 0.0;
  };
  run->test_accuracy = number("test_accuracy");
  run->examples_per_sec = number("examples_per_sec");
  run->dropped = number("dropped_gradients");
  if (number("global_step") > 0) {
    run->examples_per_step = number("examples") / number("global_step");
  }
  if (const Json* h = FindMember(*metrics, "staleness_histogram"); h != nullptr && h->is_array()) {
    for (const Json& c : *h) run->staleness.push_back(c.get<double>());
  }
  if (const Json* r = FindMember(*metrics, "replicas"); r != nullptr && r->is_array()) {
    for (const Json& rep : *r) {
      const Json* replica = FindMember(rep, "replica");
      const Json* steps = FindMember(rep, "steps");
      const Json* rate = FindMember(rep, "examples_per_sec");
      const Json* examples = FindMember(rep, "examples");
      if (replica != nullptr && replica->get<double>() == 0 && steps != nullptr &&
          rate != nullptr && examples != nullptr && rate->get<double>() > 0 &&
          steps->get<double>() > 0) {
        const double seconds = examples->get<double>() / rate->get<double>();
        run->ms_per_step = 1000 * seconds / steps->get<double>();
      }
    }
  }
  auto lines = ReadFile(dir + "/eval/scalars.jsonl");
  if (!lines.ok()) return lines.status();
  for (absl::string_view line : absl::StrSplit(*lines, '\n', absl::SkipEmpty())) {
    auto json = ParseJson(line);
    if (!json.ok()) continue;
    const Json* wall = FindMember(*json, "wall_time");
    const Json* step = FindMember(*json, "step");
    const Json* loss = FindMember(*json, "loss");
    const Json* accuracy = FindMember(*json, "accuracy");
    if (wall == nullptr || step == nullptr || loss == nullptr || accuracy == nullptr) continue;
    EvalPoint p{wall->get<double>() - start_unix, step->get<int64_t>(), loss->get<double>(),
                accuracy->get<double>()};
    run->evals.push_back(p);
    if (run->time_to_target < 0 && p.accuracy >= target) run->time_to_target = p.wall_s;
  }
  std::sort(run->evals.begin(), run->evals.end(),
            [](const EvalPoint& a, const EvalPoint& b) { return a.step < b.step; });
  return absl::OkStatus();
}

std::string GnuplotPath() {
  for (const char* p : {"/usr/bin/gnuplot", "/usr/local/bin/gnuplot"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// Writes the data files and the gnuplot script under `dir`, runs gnuplot.
absl::Status Plot(const std::string& dir, const std::vector<ExperimentMode>& mode_specs,
                  const std::vector<Run>& runs) {
  std::vector<std::string> modes;
  for (const ExperimentMode& m : mode_specs) modes.push_back(m.name);
  const std::string data = dir + "/data";
  if (absl::Status s = MakeDirs(data); !s.ok()) return s;
  std::string time_plot, step_plot;
  // The accuracy axis starts near the lowest final accuracy, so that the
  // range where the modes differ is not squeezed by the first evaluations.
  double lowest_final = 1;
  for (const Run& r : runs) lowest_final = std::min(lowest_final, r.test_accuracy);
  const double y_from = std::max(0.0, std::floor((lowest_final - 0.05) * 100) / 100);
  std::map<std::string, std::vector<double>> staleness;  // mode -> fractions
  for (const ExperimentMode& spec : mode_specs) {
    const std::string& mode = spec.name;
    const Run* first = nullptr;
    for (const Run& r : runs) {
      if (r.mode == mode && first == nullptr) first = &r;
    }
    if (first == nullptr) continue;
    std::string rows;
    // Columns: wall time, global step, accuracy, loss, examples trained.
    for (const EvalPoint& p : first->evals) {
      absl::StrAppendFormat(&rows, "%.3f,%d,%.5f,%.5f,%.0f\n", p.wall_s, p.step, p.accuracy, p.loss,
                            p.step * first->examples_per_step);
    }
    const std::string file = absl::StrCat(data, "/", spec.dir, ".csv");
    if (absl::Status s = WriteFileAtomically(file, rows); !s.ok()) return s;
    absl::StrAppend(&time_plot, time_plot.empty() ? "" : ", ", "\"", file,
                    "\" using 1:3 with linespoints title \"", mode, "\"");
    absl::StrAppend(&step_plot, step_plot.empty() ? "" : ", ", "\"", file,
                    "\" using 5:3 with linespoints title \"", mode, "\"");
    double total = 0;
    for (const Run& r : runs) {
      if (r.mode != mode) continue;
      std::vector<double>& f = staleness[mode];
      f.resize(std::max(f.size(), r.staleness.size()));
      for (size_t b = 0; b < r.staleness.size(); ++b) {
        f[b] += r.staleness[b];
        total += r.staleness[b];
      }
    }
    for (double& v : staleness[mode]) v = total > 0 ? v / total : 0;
  }
  std::string hist = "# bucket";
  for (const std::string& mode : modes) absl::StrAppend(&hist, ",", mode);
  hist += "\n";
  for (int b = 0; b < kStalenessBuckets; ++b) {
    absl::StrAppend(&hist, StalenessBucketName(b));
    for (const std::string& mode : modes) {
      const std::vector<double>& f = staleness[mode];
      absl::StrAppendFormat(&hist, ",%.5f", b < static_cast<int>(f.size()) ? f[b] : 0.0);
    }
    hist += "\n";
  }
  if (absl::Status s = WriteFileAtomically(data + "/staleness.csv", hist); !s.ok()) return s;
  std::string hist_plot;
  for (size_t m = 0; m < modes.size(); ++m) {
    absl::StrAppend(&hist_plot, m == 0 ? absl::StrCat("\"", data, "/staleness.csv\"") : ", \"\"",
                    " using ", m + 2, m == 0 ? ":xtic(1)" : "", " title \"", modes[m], "\"");
  }
  const std::string script = absl::StrCat(
      "set terminal pngcairo size 960,600\n"
      "set datafile separator \",\"\n"
      "set grid\n"
      "set key bottom right\n"
      "set ylabel \"test accuracy\"\n"
      "set yrange [",
      absl::StrFormat("%.2f", y_from),
      ":*]\n"
      "set output \"",
      dir,
      "/accuracy_vs_time.png\"\n"
      "set title \"Test accuracy against wall time\"\n"
      "set xlabel \"wall time since launch (s)\"\n"
      "plot ",
      time_plot,
      "\n"
      "set output \"",
      dir,
      "/accuracy_vs_examples.png\"\n"
      "set title \"Test accuracy against training examples processed\"\n"
      "set xlabel \"training examples (every replica's)\"\n"
      "plot ",
      step_plot,
      "\n"
      "set output \"",
      dir,
      "/staleness.png\"\n"
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
  if (absl::Status s = WriteFileAtomically(dir + "/plots.gp", script); !s.ok()) return s;
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

}  // namespace

absl::StatusOr<ExperimentMode> ParseExperimentMode(const std::string& mode, int replicas) {
  ExperimentMode m;
  m.name = mode;
  m.dir = mode;
  for (char& c : m.dir) {
    if (c == '+' || c == ':') c = '_';
  }
  int k = 0;
  if (mode == "async" || mode == "sync") {
    m.flags = {"--consistency=" + mode};
  } else if (mode.rfind("ssp:", 0) == 0 && absl::SimpleAtoi(mode.substr(4), &k) && k >= 0) {
    m.flags = {"--consistency=" + mode};
  } else if (mode.rfind("sync+backup:", 0) == 0 && absl::SimpleAtoi(mode.substr(12), &k)) {
    if (k < 1 || k >= replicas) {
      return absl::InvalidArgumentError(absl::StrCat("mode \"", mode,
                                                     "\": backups must be from 1 to ", replicas - 1,
                                                     " with ", replicas, " training replicas"));
    }
    m.flags = {"--consistency=sync", absl::StrCat("--replicas_to_aggregate=", replicas - k)};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("mode \"", mode, "\": must be async, sync, sync+backup:K or ssp:S"));
  }
  return m;
}

StalenessSummary SummarizeStaleness(const std::vector<double>& histogram) {
  StalenessSummary s;
  double total = 0, weighted = 0;
  for (int b = 0; b < static_cast<int>(histogram.size()) && b < kStalenessBuckets; ++b) {
    total += histogram[b];
    weighted += histogram[b] * StalenessBucketMid(b);
  }
  if (total <= 0) return s;
  s.mean = weighted / total;
  double seen = 0;
  for (int b = 0; b < static_cast<int>(histogram.size()) && b < kStalenessBuckets; ++b) {
    seen += histogram[b];
    if (seen >= 0.99 * total) {
      s.p99 = StalenessBucketUpper(b);
      break;
    }
  }
  return s;
}

int ExperimentMain(const std::string& self_path, CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain experiment: %s\n", std::string(s.message()).c_str());
    return ExitCodeFor(s);
  };
  auto modes_flag = args.GetString("modes", "async,sync,sync+backup:1,ssp:2");
  auto workers = args.GetInt("workers", 2);
  auto ps = args.GetInt("ps", 1);
  auto repeats = args.GetInt("repeats", 1);
  auto target = args.GetDouble("target", 0.80);
  auto eval_poll = args.GetInt("eval_poll_secs", 1);
  for (const absl::Status& s : {modes_flag.status(), workers.status(), ps.status(),
                                repeats.status(), target.status(), eval_poll.status()}) {
    if (!s.ok()) return fail(s);
  }
  if (*workers < 1 || *workers > 16 || *ps < 1 || *ps > 16 || *repeats < 1 || *repeats > 20) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--workers=", *workers, " --ps=", *ps, " --repeats=", *repeats,
                     ": workers and ps must be in 1..16, repeats in 1..20")));
  }
  if (!(*target > 0 && *target < 1)) {
    return fail(
        absl::InvalidArgumentError(absl::StrCat("--target=", *target, ": an accuracy in (0, 1)")));
  }
  // The job flags are checked here, before any run, and passed to each.
  auto job = JobSpecFromFlags(args);
  if (!job.ok()) return fail(job.status());
  auto output_dir = OutputDirFromFlags(args, "");
  if (!output_dir.ok()) return fail(output_dir.status());
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s);
  const int replicas = static_cast<int>(*workers) + (job->chief_trains ? 1 : 0);
  std::vector<ExperimentMode> modes;
  for (absl::string_view m : absl::StrSplit(*modes_flag, ',', absl::SkipEmpty())) {
    auto mode = ParseExperimentMode(std::string(m), replicas);
    if (!mode.ok()) return fail(mode.status());
    modes.push_back(*mode);
  }
  if (modes.empty()) return fail(absl::InvalidArgumentError("--modes names no mode"));
  std::vector<std::string> passed;
  bool checkpoint_flag = false;
  for (const std::string& flag : args.raw_flags()) {
    const std::string name = flag.substr(2, flag.find('=') - 2);
    const auto& names = JobFlagNames();
    if (name == "output_dir" || name == "consistency" || name == "replicas_to_aggregate" ||
        std::find(names.begin(), names.end(), name) == names.end()) {
      continue;
    }
    checkpoint_flag |= name == "checkpoint_secs" || name == "checkpoint_steps";
    passed.push_back(flag);
  }
  // A checkpoint every second: what the evaluator scores, the points of
  // the accuracy curves.
  if (!checkpoint_flag) passed.push_back("--checkpoint_secs=1");
  const std::string dir = *output_dir + "/experiment";
  std::vector<Run> runs;
  for (int r = 1; r <= *repeats; ++r) {
    for (const ExperimentMode& mode : modes) {
      LaunchOptions launch;
      launch.self_path = self_path;
      launch.num_ps = static_cast<int>(*ps);
      launch.num_workers = static_cast<int>(*workers);
      launch.with_evaluator = true;
      launch.eval_poll_secs = static_cast<int>(*eval_poll);
      launch.output_dir = absl::StrCat(dir, "/runs/", mode.dir, "-r", r);
      // A fresh directory: a job resumes from checkpoints it finds.
      std::error_code ec;
      std::filesystem::remove_all(launch.output_dir, ec);
      launch.job_flags = passed;
      launch.job_flags.insert(launch.job_flags.end(), mode.flags.begin(), mode.flags.end());
      launch.timeout = absl::Minutes(30);
      std::printf("experiment: %s, repeat %d of %d: %s\n", mode.name.c_str(), r,
                  static_cast<int>(*repeats), absl::StrJoin(launch.job_flags, " ").c_str());
      std::fflush(stdout);
      const double start_unix = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
      const absl::Time start = absl::Now();
      const int code = RunLaunch(launch);
      if (code != kExitOk) {
        return fail(
            absl::InternalError(absl::StrCat(mode.name, " run ", r, " failed (exit ", code,
                                             "); logs under ", launch.output_dir, "/logs")));
      }
      Run run;
      run.mode = mode.name;
      run.repeat = r;
      run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (absl::Status s = ReadRun(launch.output_dir, start_unix, *target, &run); !s.ok()) {
        return fail(s);
      }
      runs.push_back(std::move(run));
    }
  }
  // runs.csv
  std::string csv =
      "mode,repeat,global_step,wall_s,eval_loss,eval_accuracy,staleness_mean,staleness_p99\n";
  for (const Run& run : runs) {
    const StalenessSummary st = SummarizeStaleness(run.staleness);
    for (const EvalPoint& p : run.evals) {
      absl::StrAppendFormat(&csv, "%s,%d,%d,%.3f,%.5f,%.5f,%.3f,%.0f\n", run.mode, run.repeat,
                            p.step, p.wall_s, p.loss, p.accuracy, st.mean, st.p99);
    }
  }
  if (absl::Status s = WriteFileAtomically(dir + "/runs.csv", csv); !s.ok()) return fail(s);
  // summary.md
  std::string md = absl::StrFormat(
      "| mode | runs | time to accuracy %.2f (s) | final test accuracy | ms per step (replica 0) "
      "| examples/s | dropped gradients | staleness mean | staleness p99 | run (s) |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
      *target);
  for (const ExperimentMode& mode : modes) {
    std::vector<double> reach, acc, ms, rate, dropped, mean, p99, secs;
    int never = 0, n = 0;
    for (const Run& run : runs) {
      if (run.mode != mode.name) continue;
      ++n;
      if (run.time_to_target >= 0) {
        reach.push_back(run.time_to_target);
      } else {
        ++never;
      }
      acc.push_back(run.test_accuracy);
      ms.push_back(run.ms_per_step);
      rate.push_back(run.examples_per_sec);
      dropped.push_back(run.dropped);
      const StalenessSummary st = SummarizeStaleness(run.staleness);
      mean.push_back(st.mean);
      p99.push_back(st.p99);
      secs.push_back(run.seconds);
    }
    const std::string reached =
        reach.empty() ? "not reached"
                      : absl::StrFormat("%.1f%s", Median(reach),
                                        never > 0 ? absl::StrCat(" (", never, " never)") : "");
    absl::StrAppendFormat(&md,
                          "| %s | %d | %s | %.4f | %.1f | %.0f | %.0f | %.2f | %.0f | %.1f |\n",
                          mode.name, n, reached, Median(acc), Median(ms), Median(rate),
                          Median(dropped), Median(mean), Median(p99), Median(secs));
  }
  const std::string header = absl::StrCat(
      "Medians over repeats. ", *workers, " workers and the chief as replicas, ", *ps,
      " PS; flags: ", absl::StrJoin(passed, " "),
      ". Time to accuracy: from launch to the first checkpoint the evaluator scored at or above "
      "the target. Staleness: PS steps between a gradient's pull and its apply.\n\n");
  if (absl::Status s = WriteFileAtomically(dir + "/summary.md", header + md); !s.ok()) {
    return fail(s);
  }
  absl::Status plotted = Plot(dir, modes, runs);
  std::printf("\n%s%s\n", header.c_str(), md.c_str());
  std::printf("written: %s/runs.csv, %s/summary.md%s\n", dir.c_str(), dir.c_str(),
              plotted.ok() ? absl::StrCat(", ", dir, "/accuracy_vs_time.png, ", dir,
                                          "/accuracy_vs_examples.png, ", dir, "/staleness.png")
                                 .c_str()
                           : "");
  if (!plotted.ok()) return fail(plotted);
  return kExitOk;
}

}  // namespace pstrain
