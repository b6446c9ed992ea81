#include "coordinator/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/checkpoint_layout.h"
#include "common/file_util.h"
#include "common/json.h"
#include "common/logging.h"

namespace pstrain::coordinator {

absl::StatusOr<CheckpointRecord> SaveCheckpoint(client::PsClient* client, const std::string& dir,
                                                int64_t step, int keep, bool final,
                                                bool spare_unscored, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  // A save that fails leaves no ckpt-S directory behind (the PS may have
  // made it, or written some shards): it would never be completed.
  auto discard = [&](const absl::Status& why) {
    auto index = ReadCheckpointIndex(dir);
    if (!index.ok() || index->step != step) {
      std::error_code ec;
      std::filesystem::remove_all(CheckpointDir(dir, step), ec);
    }
    return why;
  };
  auto shards = client->SaveCheckpoint(dir, step, timeout);
  if (!shards.ok()) return discard(shards.status());
  CheckpointRecord record;
  record.step = step;
  Json manifest = Json::object();
  manifest["step"] = step;
  manifest["wall_time"] = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  Json list = Json::array();
  for (size_t i = 0; i < shards->size(); ++i) {
    const v1::SaveCheckpointResponse& r = (*shards)[i];
    Json shard = Json::object();
    shard["file"] = std::filesystem::path(r.path()).filename().string();
    shard["bytes"] = r.bytes();
    shard["crc32c"] = r.crc32c();
    list.push_back(std::move(shard));
    record.bytes += r.bytes();
    record.ps_seconds = std::max(record.ps_seconds, r.seconds());
  }
  manifest["shards"] = std::move(list);
  if (absl::Status s = WriteFileAtomically(ManifestPath(dir, step), manifest.dump() + "\n");
      !s.ok()) {
    return discard(s);
  }
  Json index = Json::object();
  index["step"] = step;
  if (final) index["final"] = true;
  if (absl::Status s = WriteFileAtomically(CheckpointIndexPath(dir), index.dump() + "\n");
      !s.ok()) {
    return discard(s);
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
  // are never completed: this chief writes one checkpoint at a time, and an
  // earlier chief's are over. After a roll-back their higher steps would
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
  record.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return record;
}

void SetAsideCheckpoint(const std::string& dir, int64_t step, absl::string_view why) {
  const std::string from = CheckpointDir(dir, step);
  const std::string to = from + ".corrupt";
  std::error_code ec;
  std::filesystem::remove_all(to, ec);
  std::filesystem::rename(from, to, ec);
  if (ec) {
    Log("checkpoint at step ", step, " cannot be used (", why, ") nor set aside: ", ec.message());
    return;
  }
  Log("checkpoint at step ", step, " cannot be used (", why, "); set aside as ", to);
}

}  // namespace pstrain::coordinator
