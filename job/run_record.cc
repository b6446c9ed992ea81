#include "job/run_record.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "job/job_description.h"

namespace pstrain {

std::string RunRecordPath(const std::string& dir) { return dir + "/run.json"; }

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

absl::Status CheckRelaunch(const std::string& dir, const Json& model) {
  const std::string path = RunRecordPath(dir);
  absl::StatusOr<Json> before = ReadRunModel(dir);
  if (before.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (before.status().code() == absl::StatusCode::kDataLoss) {
    return absl::DataLossError(absl::StrCat(before.status().message(), "; move it away to go on"));
  }
  if (!before.ok()) return before.status();
  const std::vector<std::string> diff = ModelDifferences(*before, model, "on disk", "in this job");
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      dir, " holds a run of another model (", path,
      "), and its checkpoints cannot be restored "
      "into this one: ",
      absl::StrJoin(diff, "; "),
      ". Nothing was changed. Relaunch with that run's flags and --model_config to resume it, "
      "or give a new --output_dir to start afresh"));
}

absl::Status WriteRunStart(const std::string& dir, Json run, absl::Time started) {
  const std::string path = RunRecordPath(dir);
  int64_t launches = 0;
  std::string first = Rfc3339(started);
  if (auto text = ReadFile(path); text.ok()) {
    if (auto old = ParseJson(*text); old.ok()) {
      const Json* n = FindMember(*old, "launches");
      if (n != nullptr && n->is_number_integer()) launches = n->get<int64_t>();
      const Json* f = FindMember(*old, "first_started");
      if (f != nullptr && f->is_string()) first = f->get<std::string>();
    }
  }
  run["started"] = Rfc3339(started);
  run["first_started"] = first;
  run["launches"] = launches + 1;
  return WriteFileAtomically(path, run.dump(2) + "\n");
}

absl::Status WriteRunEnd(const std::string& dir, const absl::Status& outcome, absl::Time ended) {
  const std::string path = RunRecordPath(dir);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  PSTRAIN_ASSIGN_OR_RETURN(Json run, ParseJson(text));
  run["ended"] = Rfc3339(ended);
  run["outcome"] = outcome.ok() ? std::string("ok") : outcome.ToString();
  return WriteFileAtomically(path, run.dump(2) + "\n");
}

}  // namespace pstrain
