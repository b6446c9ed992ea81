// An in-memory image classification data set (MNIST layout) and the
// per-replica view a trainer iterates: sharding, a seeded shuffle per epoch,
// and fixed-size batches.
#ifndef PSTRAIN_DATA_DATASET_H_
#define PSTRAIN_DATA_DATASET_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::data {

// Examples as floats in [0, 1], row-major, with int32 labels.
struct Dataset {
  int64_t num_examples = 0;
  int64_t example_dim = 0;
  std::vector<float> features;   // num_examples * example_dim
  std::vector<int32_t> labels;   // num_examples
};

enum class Split { kTrain, kTest };

// Loads "<dir>/train-images-idx3-ubyte.gz" and "train-labels-idx1-ubyte.gz"
// (or t10k-* for kTest); the ".gz" suffix may be absent. Errors from
// ReadIdxFile, or DataLoss naming both files when their counts differ or a
// label is above 9.
absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split);

// Iterates one replica's shard, sharding by record: at the start of each
// epoch the whole set is shuffled from (seed, epoch), the same permutation
// on every replica, and replica r takes the examples at positions r,
// r + R, r + 2R... (R = num_replicas); they are cut into batches of
// `batch_size`, and the last, short batch of an epoch is dropped so every
// step has the same size. So the k-th batches of all R replicas together
// hold exactly the examples of the k-th batch of one replica with batch
// R x batch_size: a sync job sees the data of a single larger batch.
// Thread-compatible.
class ShardIterator {
 public:
  // REQUIRES: dataset outlives the iterator; 0 <= replica < num_replicas;
  // batch_size >= 1.
  ShardIterator(const Dataset* dataset, int replica, int num_replicas,
                int batch_size, uint64_t seed);

  int64_t shard_size() const { return static_cast<int64_t>(indices_.size()); }
  int64_t batches_per_epoch() const { return shard_size() / batch_size_; }

  // Fills the next batch (batch_size x example_dim features and labels),
  // advancing to a new epoch when the current one is used up. Returns the
  // epoch (0-based) the batch belongs to.
  int64_t Next(float* features, int32_t* labels);

  // Moves past the next `batches` batches without gathering them, as if
  // Next had been called that many times (resuming from a checkpoint).
  void Skip(int64_t batches);

 private:
  void StartEpoch();

  const Dataset* const dataset_;
  const int replica_;
  const int num_replicas_;
  const int batch_size_;
  const uint64_t seed_;
  std::vector<int64_t> order_;    // this epoch's permutation of the whole set
  std::vector<int64_t> indices_;  // this replica's share of it, in order
  int64_t epoch_ = -1;
  int64_t position_ = 0;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_DATASET_H_
