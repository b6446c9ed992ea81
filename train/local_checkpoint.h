// `pstrain train --local`'s checkpoints, in the cluster's layout
// (common/checkpoint_layout.h): ckpt-S/shard-0-of-1 holds what one PS
// would, every dense slice of the model with its optimizer slots and every
// embedding row with its own, so the evaluator, inspect, evaluate, predict
// and export read a local run as they read a cluster's, and either resumes
// the other's checkpoints (a cluster's are re-sliced onto one shard).
// Stateless; thread-compatible.
#ifndef PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_
#define PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/placement.h"
#include "train/local_table.h"

namespace pstrain::train {

// What a local run trains, held as one PS would hold it.
struct LocalModelState {
  Placement placement;           // the model's variables on one PS
  std::vector<int64_t> offsets;  // each variable's first element in `params`
  std::string optimizer;         // its name, as the shard header records it
  std::vector<float>* params = nullptr;
  // The optimizer's slots, each the size of `params`.
  std::vector<std::vector<float>>* slots = nullptr;
  LocalTables* tables = nullptr;
};

// Writes checkpoint `step` of `state` under `dir` (the shard, fsynced, then
// its MANIFEST and the index, as a chief commits one: checkpoint/commit.h),
// keeping the newest `keep`; `final` marks the run's last. A save that fails
// leaves no ckpt-S behind; the error names the file.
absl::Status SaveLocalCheckpoint(const std::string& dir, int64_t step, const LocalModelState& state,
                                 int keep, bool final);

// Loads the newest complete checkpoint under `dir` into `state` and returns
// its step; 0 (nothing changed) when there is none. A checkpoint written by
// N PS is re-sliced. DataLoss naming the file for one that does not read back
// (a failed checksum, a short file); FailedPrecondition naming what differs
// for one of another optimizer or other shapes, with `state` unchanged.
absl::StatusOr<int64_t> RestoreLocalCheckpoint(const std::string& dir,
                                               const LocalModelState& state);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_LOCAL_CHECKPOINT_H_
