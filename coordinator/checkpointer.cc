#include "coordinator/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/commit.h"
#include "cluster/checkpoint_layout.h"
#include "base/logging.h"

namespace pstrain::coordinator {

absl::StatusOr<CheckpointRecord> SaveCheckpoint(client::PsAdmin* admin, const std::string& dir,
                                                int64_t step, int keep, bool final,
                                                bool spare_unscored, absl::Duration timeout,
                                                bool release_hold) {
  const absl::Time start = absl::Now();
  // A save that fails leaves no ckpt-S directory behind (the PS may have
  // made it, or written some shards): it would never be completed.
  auto shards = admin->SaveCheckpoint(dir, step, timeout, release_hold);
  if (!shards.ok()) {
    if (release_hold) admin->ReleasePushes().IgnoreError();  // the leases end them anyway
    ckpt::DiscardCheckpoint(dir, step);
    return shards.status();
  }
  CheckpointRecord record;
  record.step = step;
  std::vector<ckpt::WrittenShard> written;
  for (const v1::SaveCheckpointResponse& r : *shards) {
    written.push_back({r.path(), r.bytes(), r.crc32c()});
    record.bytes += r.bytes();
    record.ps_seconds = std::max(record.ps_seconds, r.seconds());
  }
  if (absl::Status s = ckpt::CommitCheckpoint(dir, step, written, keep, final, spare_unscored);
      !s.ok()) {
    ckpt::DiscardCheckpoint(dir, step);
    return s;
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
