#include "chief/checkpointer.h"

#include <sys/stat.h>

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

namespace pstrain::chief {
namespace {

}  // namespace

absl::StatusOr<CheckpointRecord> SaveCheckpoint(worker::PsClient* client, const std::string& dir,
                                                int64_t step, int keep, bool final,
                                                bool spare_unscored, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  auto shards = client->SaveCheckpoint(dir, step, timeout);
  if (!shards.ok()) return shards.status();
  CheckpointRecord record;
  record.step = step;
  Json manifest = Json::Object();
  manifest.Set("step", Json::Number(static_cast<double>(step)));
  manifest.Set("wall_time",
               Json::Number(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())));
  Json list = Json::Array();
  for (size_t i = 0; i < shards->size(); ++i) {
    const v1::SaveCheckpointResponse& r = (*shards)[i];
    Json shard = Json::Object();
    shard.Set("file", Json::String(std::filesystem::path(r.path()).filename().string()));
    shard.Set("bytes", Json::Number(static_cast<double>(r.bytes())));
    shard.Set("crc32c", Json::Number(r.crc32c()));
    list.Append(std::move(shard));
    record.bytes += r.bytes();
    record.ps_seconds = std::max(record.ps_seconds, r.seconds());
  }
  manifest.Set("shards", std::move(list));
  if (absl::Status s = WriteFileAtomically(ManifestPath(dir, step), manifest.Dump() + "\n");
      !s.ok()) {
    return s;
  }
  Json index = Json::Object();
  index.Set("step", Json::Number(static_cast<double>(step)));
  if (final) index.Set("final", Json::Bool(true));
  if (absl::Status s = WriteFileAtomically(CheckpointIndexPath(dir), index.Dump() + "\n");
      !s.ok()) {
    return s;
  }
  // Only now, with the new one complete and named, the oldest go; not
  // those an evaluator has yet to score.
  const int64_t scored =
      spare_unscored ? ReadScoredStep(dir) : std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> steps = ListCheckpointSteps(dir);
  for (size_t i = 0; i + std::max(keep, 1) < steps.size(); ++i) {
    if (steps[i] == step || steps[i] > scored) continue;
    std::error_code ec;
    std::filesystem::remove_all(CheckpointDir(dir, steps[i]), ec);
    if (ec) Log("could not remove ", CheckpointDir(dir, steps[i]), ": ", ec.message());
  }
  record.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return record;
}

absl::StatusOr<int64_t> LatestCheckpoint(const std::string& dir, int num_ps) {
  auto index = ReadCheckpointIndex(dir);
  if (!index.ok()) return index.status();
  auto bad = [](const std::string& file, absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint ", file, ": ", what));
  };
  const int64_t step = index->step;
  const std::string manifest_path = ManifestPath(dir, step);
  auto manifest_text = ReadFile(manifest_path);
  if (!manifest_text.ok()) return bad(manifest_path, manifest_text.status().message());
  auto manifest = ParseJson(*manifest_text);
  const Json* shards = manifest.ok() ? manifest->Find("shards") : nullptr;
  if (shards == nullptr || !shards->is_array()) return bad(manifest_path, "no shard list");
  if (static_cast<int>(shards->array_items().size()) != num_ps) {
    return bad(manifest_path, absl::StrCat("it has ", shards->array_items().size(),
                                           " shards but this job has ", num_ps, " ps"));
  }
  for (int i = 0; i < num_ps; ++i) {
    const std::string path = ShardPath(dir, step, i, num_ps);
    const Json* bytes = shards->array_items()[i].Find("bytes");
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return bad(path, "missing");
    if (bytes == nullptr || !bytes->is_number() ||
        static_cast<int64_t>(bytes->number_value()) != static_cast<int64_t>(st.st_size)) {
      return bad(path, absl::StrCat("holds ", st.st_size, " bytes, the MANIFEST says ",
                                    bytes == nullptr ? 0 : bytes->number_value()));
    }
  }
  return step;
}

}  // namespace pstrain::chief
