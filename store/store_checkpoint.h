// A stored tensor as a checkpoint record (checkpoint/checkpoint_shard.h's
// TensorCheckpoint) and back: values with their optimizer slots, the update
// count, and a table's row ids with their own counts. ShardStore locks its
// tensors and calls these for Snapshot and Restore.
#ifndef PSTRAIN_STORE_STORE_CHECKPOINT_H_
#define PSTRAIN_STORE_STORE_CHECKPOINT_H_

#include "absl/status/status.h"
#include "checkpoint/reshard.h"
#include "proto/checkpoint.pb.h"
#include "store/stored_tensor.h"

namespace pstrain::ps {

v1::TensorCheckpoint RecordOfLocked(const StoredTensor& t) ABSL_SHARED_LOCKS_REQUIRED(t.mu);

// A dense t's record from its values and slots as `data` holds them
// (HoldDataLocked) with update count `updates`: no lock needed.
v1::TensorCheckpoint RecordOfDense(const StoredTensor& t, int64_t updates, const HeldBytes& data);

// Whether `c` (a record with t's key) can replace t's contents on ps:
// `ps_index` of `num_ps`: same kind, a table's rows and slots well formed
// and its ids owned here, a dense slice's size. The error's message names
// what disagrees (the caller adds which checkpoint).
absl::Status CheckRecordFits(const StoredTensor& t, const v1::TensorCheckpoint& c, int ps_index,
                             int num_ps);

// Replaces t's values, slots, update count and table rows with those of `c`
// (checked by CheckRecordFits). Round state is left to the caller
// (ResetRoundsLocked).
void LoadRecordLocked(StoredTensor& t, const v1::TensorCheckpoint& c)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// What t is, for re-slicing a checkpoint written by another number of PS.
ckpt::TargetTensor TargetOf(const StoredTensor& t);

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_STORE_CHECKPOINT_H_
