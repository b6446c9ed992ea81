// The last part of saving a checkpoint, once every shard of step S is on
// disk (checkpoint/checkpoint_shard.h): ckpt-S/MANIFEST, then the index
// `checkpoint` naming S, both written atomically in that order, then the
// older checkpoints beyond those kept and every incomplete ckpt-* directory
// removed (cluster/checkpoint_layout.h). The chief commits what its PS wrote;
// `pstrain train --local` commits the one shard it writes itself.
// Stateless; thread-compatible (one save at a time per directory).
#ifndef PSTRAIN_CHECKPOINT_COMMIT_H_
#define PSTRAIN_CHECKPOINT_COMMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::ckpt {

// One shard file as it was written.
struct WrittenShard {
  std::string path;  // ckpt-S/shard-I-of-N
  int64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

// Writes the MANIFEST ({"step", "wall_time", "shards": [{"file", "bytes",
// "crc32c"}]}) and the index ({"step": S}, with "final": true for the job's
// last checkpoint, which tells an evaluator it may stop after scoring it);
// then removes checkpoints beyond the newest `keep` (those after the step
// in <dir>/eval/scored spared when `spare_unscored`: an evaluator has yet to
// score them) and ckpt-* directories that are not complete (saves cut
// short). An error names the file; the caller then discards the save
// (DiscardCheckpoint).
absl::Status CommitCheckpoint(const std::string& dir, int64_t step,
                              const std::vector<WrittenShard>& shards, int keep, bool final,
                              bool spare_unscored);

// Removes ckpt-S (a save that failed: it would never be completed), unless
// the index names S.
void DiscardCheckpoint(const std::string& dir, int64_t step);

}  // namespace pstrain::ckpt

#endif  // PSTRAIN_CHECKPOINT_COMMIT_H_
