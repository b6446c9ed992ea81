// `pstrain train --local`'s checkpoints, in the cluster's layout
// (cluster/checkpoint_layout.h): a local run trains on a one-PS store in its
// own process (client/in_process_store.h), and its checkpoints are that
// PS's shard, ckpt-S/shard-0-of-1, as a one-PS cluster writes it, so the
// evaluator, inspect, evaluate, predict and export read a local run as they
// read a cluster's, and either resumes the other's checkpoints (a cluster's
// are re-sliced onto one shard).
// Stateless; thread-compatible.
#ifndef PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_
#define PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/shard_store.h"

namespace pstrain::train {

// Writes checkpoint `step` of `store` (one PS holding the whole model) under
// `dir` (the shard, fsynced, then its MANIFEST and the index, as a chief
// commits one: checkpoint/commit.h), keeping the newest `keep`; `final`
// marks the run's last. A save that fails leaves no ckpt-S behind; the
// error names the file.
absl::Status SaveLocalCheckpoint(const std::string& dir, int64_t step, const ps::ShardStore& store,
                                 int keep, bool final);

// Loads the newest complete checkpoint under `dir` into `store` (one PS,
// initialised) and returns its step; 0 (nothing changed) when there is
// none. A checkpoint written by N PS is re-sliced. DataLoss naming the file
// for one that does not read back (a failed checksum, a short file);
// FailedPrecondition naming what differs for one of another optimizer or
// other shapes, with `store` unchanged.
absl::StatusOr<int64_t> RestoreLocalCheckpoint(const std::string& dir, ps::ShardStore* store);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_
