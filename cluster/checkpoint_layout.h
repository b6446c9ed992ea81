// Where a checkpoint's files live under a job's output directory:
//   <dir>/ckpt-<step>/shard-<i>-of-<n>   each PS's part (checkpoint/checkpoint_shard.h)
//   <dir>/ckpt-<step>/MANIFEST           the chief's list of shards, written after them
//   <dir>/checkpoint                     the newest complete step, written last
//   <dir>/eval/scored                    the last step an evaluator scored
// and reading what is there. Stateless; thread-safe.
#ifndef PSTRAIN_CLUSTER_CHECKPOINT_LAYOUT_H_
#define PSTRAIN_CLUSTER_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

inline std::string CheckpointDir(const std::string& dir, int64_t step) {
  return absl::StrCat(dir, "/ckpt-", step);
}

inline std::string ShardPath(const std::string& dir, int64_t step, int ps_index, int num_ps) {
  return absl::StrCat(CheckpointDir(dir, step), "/shard-", ps_index, "-of-", num_ps);
}

inline std::string ManifestPath(const std::string& dir, int64_t step) {
  return CheckpointDir(dir, step) + "/MANIFEST";
}

inline std::string CheckpointIndexPath(const std::string& dir) { return dir + "/checkpoint"; }

inline std::string ScoredPath(const std::string& dir) { return dir + "/eval/scored"; }

// The steps of the ckpt-<step> directories under `dir`, ascending (none when
// `dir` cannot be listed).
std::vector<int64_t> ListCheckpointSteps(const std::string& dir);

struct CheckpointIndex {
  int64_t step = 0;
  bool final = false;  // the job's last checkpoint
};

// The index ({"step": S} or {"final": true, "step": S}). NotFound when
// there is none; DataLoss naming the file when it does not name a step >= 0.
absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(const std::string& dir);

// The step in ScoredPath(dir), or -1 when there is none (or it is unreadable).
int64_t ReadScoredStep(const std::string& dir);

// A checkpoint that looks whole on disk: its MANIFEST lists its shards,
// whose files exist with the listed sizes. Their checksums are verified
// when they are read.
struct CompleteCheckpoint {
  int64_t step = 0;
  int num_ps = 0;  // the PS that wrote it
};

// A ckpt-S directory that is not complete, and why: the file and what is
// wrong with it.
struct IncompleteCheckpoint {
  int64_t step = 0;
  std::string why;
  // "checkpoint at step S is not complete: <why>".
  std::string ToString() const;
};

// The complete checkpoints under `dir`, newest first: what the chief
// restores from and the evaluator scores. A ckpt-S directory that is not
// complete (a save cut short, a shard missing or of another size, a
// MANIFEST that does not parse) is skipped, and put in `skipped` (when not
// null), also newest first.
std::vector<CompleteCheckpoint> CompleteCheckpoints(const std::string& dir,
                                                    std::vector<IncompleteCheckpoint>* skipped);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_CHECKPOINT_LAYOUT_H_
