#include "cluster/checkpoint_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/json.h"

namespace pstrain {

std::vector<int64_t> ListCheckpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind("ckpt-", 0) == 0 && absl::SimpleAtoi(name.substr(5), &step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(const std::string& dir) {
  const std::string path = CheckpointIndexPath(dir);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto json = ParseJson(*text);
  const Json* step = json.ok() ? FindMember(*json, "step") : nullptr;
  if (step == nullptr || !step->is_number_integer() || step->get<int64_t>() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": not an index naming a step"));
  }
  CheckpointIndex index;
  index.step = step->get<int64_t>();
  const Json* final = FindMember(*json, "final");
  index.final = final != nullptr && final->is_boolean() && final->get<bool>();
  return index;
}

int64_t ReadScoredStep(const std::string& dir) {
  int64_t step = -1;
  if (auto text = ReadFile(ScoredPath(dir)); text.ok()) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &step)) step = -1;
  }
  return step;
}

namespace {

// Whether checkpoint `step` under `dir` is complete; else what is wrong.
absl::StatusOr<CompleteCheckpoint> CheckComplete(const std::string& dir, int64_t step) {
  auto bad = [](const std::string& file, absl::string_view what) {
    return absl::DataLossError(absl::StrCat(file, ": ", what));
  };
  const std::string manifest_path = ManifestPath(dir, step);
  auto manifest_text = ReadFile(manifest_path);
  if (!manifest_text.ok()) {
    return bad(manifest_path, manifest_text.status().code() == absl::StatusCode::kNotFound
                                  ? "missing (the save did not finish)"
                                  : manifest_text.status().message());
  }
  auto manifest = ParseJson(*manifest_text);
  const Json* shards = manifest.ok() ? FindMember(*manifest, "shards") : nullptr;
  if (shards == nullptr || !shards->is_array() || shards->empty()) {
    return bad(manifest_path, "no shard list");
  }
  const int num_ps = static_cast<int>(shards->size());
  for (int i = 0; i < num_ps; ++i) {
    const std::string path = ShardPath(dir, step, i, num_ps);
    const Json* bytes = FindMember((*shards)[i], "bytes");
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return bad(path, "missing");
    if (bytes == nullptr || !bytes->is_number_integer() ||
        bytes->get<int64_t>() != static_cast<int64_t>(st.st_size)) {
      return bad(path, absl::StrCat("holds ", st.st_size, " bytes, the MANIFEST says ",
                                    bytes == nullptr ? "nothing" : bytes->dump()));
    }
  }
  return CompleteCheckpoint{step, num_ps};
}

}  // namespace

std::string IncompleteCheckpoint::ToString() const {
  return absl::StrCat("checkpoint at step ", step, " is not complete: ", why);
}

std::vector<CompleteCheckpoint> CompleteCheckpoints(const std::string& dir,
                                                    std::vector<IncompleteCheckpoint>* skipped) {
  std::vector<CompleteCheckpoint> out;
  std::vector<int64_t> steps = ListCheckpointSteps(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto c = CheckComplete(dir, *it);
    if (c.ok()) {
      out.push_back(*c);
    } else if (skipped != nullptr) {
      skipped->push_back({*it, std::string(c.status().message())});
    }
  }
  return out;
}

}  // namespace pstrain
