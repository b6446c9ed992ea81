// The file one PS writes for a checkpoint (ckpt-S/shard-I-of-N): its dense
// slices and embedding tables with their optimizer slots and update counts.
//
// Layout: the 8 bytes "PSCKPT01"; then records, each a uint64 length
// (little-endian), that many bytes, and the masked CRC-32C of those bytes
// (base/crc32c.h). The first record is a ShardHeader, then one
// TensorCheckpoint per tensor (proto/checkpoint.proto). Written to a
// temporary name, fsynced, renamed into place and the directory fsynced, so
// a crash leaves either no file or the whole file.
#ifndef PSTRAIN_CHECKPOINT_CHECKPOINT_SHARD_H_
#define PSTRAIN_CHECKPOINT_CHECKPOINT_SHARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/checkpoint_layout.h"
#include "base/env.h"
#include "proto/checkpoint.pb.h"

namespace pstrain::ckpt {

struct ShardContents {
  v1::ShardHeader header;
  std::vector<v1::TensorCheckpoint> tensors;
};

struct ShardWritten {
  int64_t bytes = 0;
  uint32_t crc = 0;  // CRC-32C of the whole file
};

// Writes `shard` to `path` as above (header.num_tensors is set here),
// through `env`. Internal naming the path when a write, fsync or rename
// fails; nothing is left under either name then.
absl::StatusOr<ShardWritten> WriteShard(const std::string& path, ShardContents shard,
                                        Env* env = Env::Default());

// Reads and verifies every record, of any size (a table's values and slots
// past protobuf's 2 GiB parse limit included). NotFound when the file is missing;
// DataLoss naming the file and what is wrong otherwise: not a shard (bad
// magic), a record cut short, a checksum mismatch (naming the tensor's
// index, and its key when the record parses), a record that does not parse,
// or a tensor count that differs from the header's.
absl::StatusOr<ShardContents> ReadShard(const std::string& path, Env* env = Env::Default());

// Checks embedding-table record `t` of a shard whose optimizer keeps
// `num_slots` slots against a table of `dim` floats per row: the same dim,
// one update count per row id, and (1 + num_slots) * dim floats per row.
// DataLoss saying what disagrees and naming the table (callers add the
// shard).
absl::Status CheckTableRecord(const v1::TensorCheckpoint& t, int num_slots, int64_t dim);

}  // namespace pstrain::ckpt

#endif  // PSTRAIN_CHECKPOINT_CHECKPOINT_SHARD_H_
