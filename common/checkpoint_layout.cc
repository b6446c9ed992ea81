#include "common/checkpoint_layout.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/json.h"

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
  const Json* step = json.ok() ? json->Find("step") : nullptr;
  if (step == nullptr || !step->is_number() || step->number_value() < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": not an index naming a step"));
  }
  CheckpointIndex index;
  index.step = static_cast<int64_t>(step->number_value());
  const Json* final = json->Find("final");
  index.final = final != nullptr && final->is_bool() && final->bool_value();
  return index;
}

int64_t ReadScoredStep(const std::string& dir) {
  int64_t step = -1;
  if (auto text = ReadFile(ScoredPath(dir)); text.ok()) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &step)) step = -1;
  }
  return step;
}

}  // namespace pstrain
