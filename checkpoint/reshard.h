// Restoring a checkpoint onto a different number of PS: builds the shard
// that one PS of the new cluster holds from the shards the old cluster
// wrote. Dense slices are cut from the old slices of the same variable by
// row range (every plane: values, then each optimizer slot; a non-trainable
// variable has its values alone); embedding rows
// go to the PS that owns their id under the new count (EmbeddingOwner).
// Old shards are added one at a time, so only one is in memory besides the
// result.
//
// Thread-compatible.
#ifndef PSTRAIN_CHECKPOINT_RESHARD_H_
#define PSTRAIN_CHECKPOINT_RESHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster/checkpoint_layout.h"
#include "checkpoint/checkpoint_shard.h"

namespace pstrain::ckpt {

// A tensor of the new PS, as its store holds it.
struct TargetTensor {
  std::string key;           // slice key, or the table's name
  std::string variable;
  bool embedding = false;
  int64_t row_begin = 0;     // dense: rows [row_begin, row_end) of the variable
  int64_t row_end = 0;
  int64_t row_elements = 0;  // dense: floats per row
  int64_t dim = 0;           // tables: floats per row
  // Dense: as TensorCheckpoint.update: "" for a trainable variable, else
  // a non-trainable one's ("increment", "frozen"), held without optimizer
  // slots (its values alone).
  std::string update;

  bool trainable() const { return update.empty(); }
};

class Resharder {
 public:
  // The shard for PS `ps_index` of `num_ps` holding `targets`.
  Resharder(std::vector<TargetTensor> targets, int ps_index, int num_ps);

  // Takes what the new PS holds from one old shard. DataLoss naming the
  // shard (by its header) when it disagrees with those added before (step,
  // PS count, optimizer), repeats one, or lacks the row layout of a dense
  // slice (a checkpoint written before layouts were recorded).
  absl::Status Add(const ShardContents& old);

  // The new shard, once every old shard was added. DataLoss naming the
  // tensor when old shards are missing or rows of a dense slice are in none
  // of them.
  absl::StatusOr<ShardContents> Finish();

 private:
  struct Target {
    TargetTensor def;
    v1::TensorCheckpoint out;
    int64_t rows_covered = 0;
    std::string data;  // dense: every plane, filled as shards arrive
  };
  int ps_index_;
  int num_ps_;
  std::vector<Target> targets_;
  bool started_ = false;
  v1::ShardHeader first_;  // the first old shard's header
  std::vector<bool> seen_;  // old shards added, by their ps_index
};

// The shard PS `ps_index` of `num_ps`, holding `targets`, restores from
// checkpoint `step` under `dir`, written by `written_by` PS: its own file
// when the counts agree, else re-sliced from every file, read through
// `env`. Errors of ReadShard (naming the file) and of the Resharder.
absl::StatusOr<ShardContents> ReadCheckpointFor(const std::string& dir, int64_t step,
                                                int written_by, int ps_index, int num_ps,
                                                std::vector<TargetTensor> targets,
                                                Env* env = Env::Default());

}  // namespace pstrain::ckpt

#endif  // PSTRAIN_CHECKPOINT_RESHARD_H_
