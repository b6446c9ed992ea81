// Where a trainer's batches come from: one replica's share of a training
// split, cut into fixed-size batches epoch after epoch. Two sources
// implement it: ShardIterator (data/dataset.h) over a split held in memory,
// and ExampleStream (data/example_stream.h) reading TFRecord files as a
// stream. The trainers and the Prefetcher see only this interface.
// Thread-compatible: one caller at a time.
#ifndef PSTRAIN_DATA_BATCH_SOURCE_H_
#define PSTRAIN_DATA_BATCH_SOURCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain::data {

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  virtual int64_t example_dim() const = 0;  // dense floats per example
  virtual int64_t ids_dim() const = 0;      // ids per example
  virtual int batch_size() const = 0;
  // Examples this replica takes per epoch; an epoch's last, short batch is
  // dropped, so every batch is full.
  virtual int64_t shard_size() const = 0;
  int64_t batches_per_epoch() const { return shard_size() / batch_size(); }

  // Fills the next batch (batch_size x example_dim features, batch_size x
  // ids_dim ids unless `ids` is null, batch_size labels) and returns the
  // epoch (0-based) it belongs to. Errors are the source's: a file that
  // cannot be read, a bad record.
  virtual absl::StatusOr<int64_t> Next(float* features, int32_t* labels,
                                       int64_t* ids = nullptr) = 0;

  // Moves to batch `batch` (counted from 0 over all epochs), as if a fresh
  // source had handed out that many: where a trainer resumes from a
  // checkpoint, or carries on after its parameter servers were restored.
  virtual absl::Status Seek(int64_t batch) = 0;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_BATCH_SOURCE_H_
