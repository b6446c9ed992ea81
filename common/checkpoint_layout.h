// Where a checkpoint's files live under a job's output directory:
//   <dir>/ckpt-<step>/shard-<i>-of-<n>   each PS's part (ps_server/checkpoint_shard.h)
//   <dir>/ckpt-<step>/MANIFEST           the chief's list of shards, written after them
//   <dir>/checkpoint                     the newest complete step, written last
// Header-only; stateless.
#ifndef PSTRAIN_COMMON_CHECKPOINT_LAYOUT_H_
#define PSTRAIN_COMMON_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <string>

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

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CHECKPOINT_LAYOUT_H_
