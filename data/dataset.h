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
#include "data/batch_source.h"

namespace pstrain::data {

// Examples in the layout every input gives (data/feature_spec.h): dense
// floats (pixels in [0, 1] for IDX files) and id sequences, row-major, with
// int32 labels.
//
// A split of images that is only cut into batches or scored can be held
// as its bytes instead (LoadReplicaData's and LoadInput's
// `pixels_as_bytes`: IDX files, and TFRecord images stored as bytes):
// `features` is then empty and `pixels` holds one byte per feature, a
// quarter of the memory; CopyFeatures gives the floats `features` would
// have held, bit for bit (byte * pixel_scale).
struct Dataset {
  int64_t num_examples = 0;
  int64_t example_dim = 0;      // dense floats per example
  int64_t ids_dim = 0;          // ids per example (0 for IDX files)
  std::vector<float> features;  // num_examples * example_dim, or empty
  std::vector<uint8_t> pixels;  // num_examples * example_dim when features is empty
  float pixel_scale = 1.0f / 255.0f;  // a pixel's float: byte * pixel_scale
  std::vector<int64_t> ids;           // num_examples * ids_dim
  std::vector<int32_t> labels;        // num_examples
};

// An IDX pixel byte's float is byte * kPixelScale: [0, 255] onto [0, 1].
inline constexpr float kPixelScale = 1.0f / 255.0f;

// Turns a data set held as bytes into one held as floats (the same
// values); nothing for one held as floats.
void HoldAsFloats(Dataset* ds);

// Writes the `count` examples' features from example `first` on to `out`
// (count * example_dim floats), from whichever form `ds` holds them in.
// REQUIRES: 0 <= first, first + count <= ds.num_examples.
void CopyFeatures(const Dataset& ds, int64_t first, int64_t count, float* out);

enum class Split { kTrain, kTest };

// The files of one split in `dir`, in order: either one pair,
// "train-images-idx3-ubyte" and "train-labels-idx1-ubyte" (t10k-* for
// kTest), or N pairs "train-images-idx3-ubyte-SSSSS-of-NNNNN" and
// "train-labels-idx1-ubyte-SSSSS-of-NNNNN" (`pstrain data shard` writes
// these); each name with or without ".gz".
struct SplitFiles {
  std::vector<std::string> images, labels;
};
// NotFound naming the first file of the split when there is none;
// FailedPrecondition naming the file when one of N is missing, a file's
// pair is missing, or the directory holds both forms.
absl::StatusOr<SplitFiles> FindSplitFiles(const std::string& dir, Split split);

// Loads every file of the split, concatenated in order. Errors from
// FindSplitFiles and ReadIdxFile, or DataLoss naming the files when a
// pair's counts differ, a label is above 9, or files disagree on the
// example shape.
absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split);

// What one of R training replicas reads. With at least as many files as
// replicas, replica r reads only files r, r + R, r + 2R... (sharding by
// file: it iterates them whole, ShardIterator(dataset, 0, 1, ...));
// otherwise every file, and each replica takes its share by record
// (ShardIterator(dataset, r, R, ...)).
// Whether R replicas shard a split of `files` files by file (at least as
// many files as replicas, and more than one) rather than by record.
inline bool ShardsByFile(int files, int num_replicas) { return files >= num_replicas && files > 1; }

struct ReplicaData {
  Dataset dataset;
  bool by_file = false;
  int files_read = 0;
  int files_total = 0;
  // Examples in the whole split (all files, from their headers): what sync
  // and ssp schedules count in.
  int64_t split_examples = 0;
  // Bad records passed over (skip_bad_records).
  int64_t skipped_records = 0;
};
// With `pixels_as_bytes` the images stay bytes (Dataset::pixels), for a
// split that is only cut into batches (ShardIterator).
// REQUIRES: 0 <= replica < num_replicas. Errors as LoadMnistFormat.
absl::StatusOr<ReplicaData> LoadReplicaData(const std::string& dir, Split split, int replica,
                                            int num_replicas, bool pixels_as_bytes = false);

// Writes a copy of the data set in `dir` to `out` (created if needed) whose
// training split is `files` gzip pairs "train-*-SSSSS-of-NNNNN.gz", file i
// holding examples [i * n / files, (i + 1) * n / files) in their order, and
// whose test split is one pair: a data_dir any job reads, whose replicas
// shard it by file when there are at least as many files as replicas.
// Returns the examples written to each training file. InvalidArgument for
// files outside 1..min(n, 99999) or `out` naming `dir`; errors of
// FindSplitFiles, ReadIdxFile and WriteIdxFile.
absl::StatusOr<std::vector<int64_t>> WriteShardedCopy(const std::string& dir,
                                                      const std::string& out, int files);

// Iterates one replica's shard, sharding by record: at the start of each
// epoch the whole set is shuffled from (seed, epoch), the same permutation
// on every replica, and replica r takes the examples at positions r,
// r + R, r + 2R... (R = num_replicas); they are cut into batches of
// `batch_size`, and the last, short batch of an epoch is dropped so every
// step has the same size. So the k-th batches of all R replicas together
// hold exactly the examples of the k-th batch of one replica with batch
// R x batch_size: a sync job sees the data of a single larger batch.
// Thread-compatible.
class ShardIterator : public BatchSource {
 public:
  // REQUIRES: dataset outlives the iterator; 0 <= replica < num_replicas;
  // batch_size >= 1.
  ShardIterator(const Dataset* dataset, int replica, int num_replicas, int batch_size,
                uint64_t seed);

  int64_t example_dim() const override { return dataset_->example_dim; }
  int64_t ids_dim() const override { return dataset_->ids_dim; }
  int batch_size() const override { return batch_size_; }
  int64_t shard_size() const override { return static_cast<int64_t>(indices_.size()); }

  // BatchSource's; never fails.
  absl::StatusOr<int64_t> Next(float* features, int32_t* labels, int64_t* ids = nullptr) override;
  absl::Status Seek(int64_t batch) override;

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
