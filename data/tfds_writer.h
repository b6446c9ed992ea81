// Writes a TensorFlow Datasets version directory of JPEG photos, laid out
// as `tfds.load` leaves cats_vs_dogs (data/tfds.h reads it): no photo set
// can be downloaded on a machine without network, so this one is made from
// the MNIST-format IDX files of a data directory (Fashion-MNIST). Each
// image is made RGB (the grey in every channel, tinted by a colour drawn
// for the image, which says nothing of its class), resized (bilinear) to a
// random size around `size` so that every image needs resizing, and
// stored as a JPEG
// (quality 90) beside "image/filename" and its int64 "label"; the training
// images then the test images, in one split "train", as cats_vs_dogs has
// only a train split ("train[:60000]" is Fashion-MNIST's own training set,
// "train[60000:]" its test set).
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_TFDS_WRITER_H_
#define PSTRAIN_DATA_TFDS_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::data {

struct TfdsWriteOptions {
  std::string name = "fashion_mnist_jpeg";
  std::string version = "1.0.0";
  int shards = 4;
  int64_t size = 32;   // the images' sides vary around this
  int64_t spread = 8;  // by up to this either way, height and width apart
  uint64_t seed = 1;
  int64_t max_examples = 0;  // 0: all; else the first N (tests)
};

struct TfdsWritten {
  std::string dir;  // OUT/NAME/VERSION
  std::vector<std::string> files;
  std::vector<int64_t> shard_lengths;
  int64_t min_side = 0, max_side = 0;  // of the images written
};

// Writes OUT/NAME/VERSION/ with dataset_info.json, features.json,
// label.labels.txt and NAME-train.tfrecord-IIIII-of-NNNNN, each file
// whole or not at all. InvalidArgument for options out of range;
// FailedPrecondition when the version directory holds a dataset_info.json
// already; the IDX reader's and the writers' errors.
absl::StatusOr<TfdsWritten> WriteIdxAsTfds(const std::string& idx_dir, const std::string& out,
                                           const TfdsWriteOptions& options);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_TFDS_WRITER_H_
