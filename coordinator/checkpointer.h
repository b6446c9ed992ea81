// The chief's side of checkpoints (cluster/checkpoint_layout.h): after every
// PS has written its shard of step S, the chief writes ckpt-S/MANIFEST and,
// last, the index `checkpoint`; a crash at any moment leaves the previous
// checkpoint whole and named by the index. Stateless; thread-safe.
#ifndef PSTRAIN_COORDINATOR_CHECKPOINTER_H_
#define PSTRAIN_COORDINATOR_CHECKPOINTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_admin.h"

namespace pstrain::coordinator {

struct CheckpointRecord {
  int64_t step = 0;
  int64_t bytes = 0;      // all shards
  double seconds = 0;     // from asking the PS to the index written
  double ps_seconds = 0;  // the slowest PS's snapshot and write
};

// Saves checkpoint `step` under `dir`: every PS writes its shard, then the
// MANIFEST ({"step", "wall_time", "shards": [{"file", "bytes", "crc32c"}]})
// and the index ({"step": S}) are written atomically, in that order; then
// checkpoints beyond the newest `keep` are removed, and so is every other
// ckpt-S directory that is not complete (a save cut short by a crash). Errors name the PS or
// the file; a save that fails removes its own ckpt-S directory.
// `final`: the job's last checkpoint; the index says so ({"step": S,
// "final": true}), which tells an evaluator it may stop after scoring it.
// `spare_unscored`: an evaluator is in the cluster, so checkpoints after
// the last step it scored (<dir>/eval/scored) are kept even beyond `keep`.
// `release_hold`: the PS hold their pushes (PsAdmin::HoldPushes); each ends
// its hold once its snapshot is cut, and on an error every hold is ended.
absl::StatusOr<CheckpointRecord> SaveCheckpoint(client::PsAdmin* admin, const std::string& dir,
                                                int64_t step, int keep, bool final = false,
                                                bool spare_unscored = false,
                                                absl::Duration timeout = absl::Minutes(10),
                                                bool release_hold = false);

// Renames ckpt-S to ckpt-S.corrupt (kept for a person to look at, no longer
// listed); logs what it did.
void SetAsideCheckpoint(const std::string& dir, int64_t step, absl::string_view why);

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_CHECKPOINTER_H_
