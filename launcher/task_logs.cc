#include "launcher/task_logs.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/json.h"

namespace pstrain::launcher {

std::string ReadNewLines(const std::string& path, int64_t* offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(*offset);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return "";
  *offset += static_cast<int64_t>(end + 1);
  text.resize(end + 1);
  return text;
}

void KeepEarlierLog(const std::string& log) {
  std::error_code ec;
  if (!std::filesystem::exists(log, ec) || std::filesystem::file_size(log, ec) == 0) return;
  const std::string stem = log.substr(0, log.size() - 4);  // less ".log"
  for (int n = 1; n < 100000; ++n) {
    const std::string kept = absl::StrCat(stem, ".", n, ".log");
    if (std::filesystem::exists(kept, ec)) continue;
    std::filesystem::rename(log, kept, ec);
    return;
  }
}

std::string WhyFailed(const std::string& log) {
  auto text = ReadFile(log);
  if (!text.ok()) return "";
  std::string last, failed;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    last = std::string(line);
    if (absl::StrContains(line, "failed") || absl::StrContains(line, "error")) failed = last;
  }
  std::string why = failed.empty() ? last : failed;
  const size_t space = why.find(' ');
  if (space == 12 && why[2] == ':' && why[8] == '.') {
    const size_t tag_end = why.find(": ", space);
    if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
  }
  return why;
}

std::optional<std::string> RelayedLine(const TaskId& id, absl::string_view line) {
  if (id.role == Role::kPs) return std::nullopt;
  if (id.role == Role::kEvaluator) {
    const size_t at = line.find("eval at step ");
    if (at == absl::string_view::npos) return std::nullopt;
    return absl::StrCat("evaluator: ", line.substr(at));
  }
  const size_t at = line.find(": step ");
  if (at == absl::string_view::npos || !absl::StrContains(line, " - loss ") ||
      !absl::StrContains(line, " - ETA ")) {
    return std::nullopt;
  }
  return absl::StrFormat("%-10s %s", id.ToString(), line.substr(at + 2));
}

absl::StatusOr<std::vector<std::string>> FinalReport(const std::string& metrics_json,
                                                     const std::string& output_dir,
                                                     const std::string& logs) {
  auto metrics = ParseJson(metrics_json);
  const Json* acc = metrics.ok() ? FindMember(*metrics, "test_accuracy") : nullptr;
  if (acc == nullptr || !acc->is_number()) {
    return absl::FailedPreconditionError("final_metrics.json has no test_accuracy");
  }
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat("test accuracy: %.4f", acc->get<double>()));
  if (const Json* auc = FindMember(*metrics, "test_auc"); auc != nullptr && auc->is_number()) {
    lines.push_back(absl::StrFormat("test auc: %.4f", auc->get<double>()));
  }
  if (const Json* rate = FindMember(*metrics, "examples_per_sec");
      rate != nullptr && rate->is_number()) {
    // The job's examples over its training wall time; each replica's own
    // rate beside it.
    std::vector<std::string> each;
    if (const Json* reps = FindMember(*metrics, "replicas"); reps != nullptr && reps->is_array()) {
      for (const Json& r : *reps) {
        const Json* task = FindMember(r, "task");
        const Json* own = FindMember(r, "examples_per_sec");
        if (task != nullptr && task->is_string() && own != nullptr && own->is_number()) {
          each.push_back(absl::StrFormat("%s %.0f", task->get<std::string>(), own->get<double>()));
        }
      }
    }
    const Json* wall = FindMember(*metrics, "training_seconds");
    // All-reduce replicas keep one pace: no list of their own rates.
    lines.push_back(absl::StrFormat(
        "training throughput: %.0f examples/s over %.1f s of training%s", rate->get<double>(),
        wall != nullptr && wall->is_number() ? wall->get<double>() : 0.0,
        each.empty() ? "" : absl::StrCat(" (per replica: ", absl::StrJoin(each, ", "), ")")));
  }
  lines.push_back(absl::StrCat("metrics: ", output_dir, "/final_metrics.json; logs: ", logs, "/"));
  return lines;
}

}  // namespace pstrain::launcher
