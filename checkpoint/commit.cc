#include "checkpoint/commit.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "absl/time/clock.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/logging.h"

namespace pstrain::ckpt {

absl::Status CommitCheckpoint(const std::string& dir, int64_t step,
                              const std::vector<WrittenShard>& shards, int keep, bool final,
                              bool spare_unscored) {
  Json manifest = Json::object();
  manifest["step"] = step;
  manifest["wall_time"] = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  Json list = Json::array();
  for (const WrittenShard& w : shards) {
    Json shard = Json::object();
    shard["file"] = std::filesystem::path(w.path).filename().string();
    shard["bytes"] = w.bytes;
    shard["crc32c"] = w.crc32c;
    list.push_back(std::move(shard));
  }
  manifest["shards"] = std::move(list);
  if (absl::Status s = WriteFileAtomically(ManifestPath(dir, step), manifest.dump() + "\n");
      !s.ok()) {
    return s;
  }
  Json index = Json::object();
  index["step"] = step;
  if (final) index["final"] = true;
  if (absl::Status s = WriteFileAtomically(CheckpointIndexPath(dir), index.dump() + "\n");
      !s.ok()) {
    return s;
  }
  // Only now, with the new one complete and named, the oldest go; not
  // those an evaluator has yet to score.
  const int64_t scored = spare_unscored ? ReadScoredStep(dir) : std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> steps = ListCheckpointSteps(dir);
  for (size_t i = 0; i + std::max(keep, 1) < steps.size(); ++i) {
    if (steps[i] == step || steps[i] > scored) continue;
    std::error_code ec;
    std::filesystem::remove_all(CheckpointDir(dir, steps[i]), ec);
    if (ec) Log("could not remove ", CheckpointDir(dir, steps[i]), ": ", ec.message());
  }
  // Directories of saves cut short (a PS or a chief that died mid-save)
  // are never completed: one checkpoint is written at a time, and an
  // earlier writer's are over. After a roll-back their higher steps would
  // otherwise outlive newer complete checkpoints.
  std::vector<IncompleteCheckpoint> incomplete;
  CompleteCheckpoints(dir, &incomplete);
  for (const IncompleteCheckpoint& c : incomplete) {
    if (c.step == step) continue;
    std::error_code ec;
    std::filesystem::remove_all(CheckpointDir(dir, c.step), ec);
    if (ec) {
      Log("could not remove ", CheckpointDir(dir, c.step), ": ", ec.message());
    } else {
      Log("removed ", CheckpointDir(dir, c.step), ", a save cut short (", c.why, ")");
    }
  }
  return absl::OkStatus();
}

void DiscardCheckpoint(const std::string& dir, int64_t step) {
  auto index = ReadCheckpointIndex(dir);
  if (index.ok() && index->step == step) return;
  std::error_code ec;
  std::filesystem::remove_all(CheckpointDir(dir, step), ec);
}

}  // namespace pstrain::ckpt
