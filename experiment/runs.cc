#include "experiment/runs.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/median.h"
#include "cluster/staleness.h"

namespace pstrain::experiment {
namespace {

// The metrics of final_metrics.json's text into *run.
absl::Status ReadMetrics(const std::string& text, ExperimentRun* run) {
  auto metrics = ParseJson(text);
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
  // A job without PS: every replica takes every global step.
  if (const Json* mode = FindMember(*metrics, "mode");
      mode != nullptr && mode->is_string() && mode->get<std::string>() == "allreduce" &&
      number("global_step") > 0) {
    run->ms_per_step = 1000 * number("training_seconds") / number("global_step");
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
  } else if (mode == "allreduce") {
    m.num_ps = 0;
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
        absl::StrCat("mode \"", mode, "\": must be async, sync, sync+backup:K, ssp:S or allreduce"));
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

absl::Status ReadRun(const std::string& dir, double start_unix, double target, ExperimentRun* run) {
  auto text = ReadFile(dir + "/final_metrics.json");
  if (!text.ok()) return text.status();
  if (absl::Status s = ReadMetrics(*text, run); !s.ok()) return s;
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

std::string RunsCsv(const std::vector<ExperimentRun>& runs) {
  std::string csv =
      "mode,repeat,global_step,wall_s,eval_loss,eval_accuracy,staleness_mean,staleness_p99\n";
  for (const ExperimentRun& run : runs) {
    const StalenessSummary st = SummarizeStaleness(run.staleness);
    for (const EvalPoint& p : run.evals) {
      absl::StrAppendFormat(&csv, "%s,%d,%d,%.3f,%.5f,%.5f,%.3f,%.0f\n", run.mode, run.repeat,
                            p.step, p.wall_s, p.loss, p.accuracy, st.mean, st.p99);
    }
  }
  return csv;
}

std::string SummaryTable(const std::vector<ExperimentMode>& modes,
                         const std::vector<ExperimentRun>& runs, double target) {
  std::string md = absl::StrFormat(
      "| mode | runs | time to accuracy %.2f (s) | final test accuracy | ms per step (replica 0) "
      "| examples/s | dropped gradients | staleness mean | staleness p99 | run (s) |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
      target);
  for (const ExperimentMode& mode : modes) {
    std::vector<double> reach, acc, ms, rate, dropped, mean, p99, secs;
    int never = 0, n = 0;
    for (const ExperimentRun& run : runs) {
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
  return md;
}

}  // namespace pstrain::experiment
