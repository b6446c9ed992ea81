// A TensorFlow Datasets dataset, as `tfds.load` leaves it on disk: one
// version directory (~/tensorflow_datasets/cats_vs_dogs/4.0.0/) holding
//   dataset_info.json   the name, version, splits (each with its shards'
//                       record counts, "shardLengths") and supervised keys
//   features.json       the features: FeaturesDict of Image (shape, dtype,
//                       encodingFormat png or jpeg), ClassLabel
//                       (numClasses), Text, Tensor...; TFDS 4's form
//                       ({"pythonClassName", "featuresDict": {"features"}})
//                       and the older one ({"type", "content"})
//   LABEL.labels.txt    a ClassLabel's class names, one per line, when it
//                       has names
//   NAME-SPLIT.tfrecord-00000-of-0000N   the records, tf.train.Example
// and TFDS's split syntax over it (https://www.tensorflow.org/datasets/splits):
// "train", "train[:80%]", "train[80%:]", "test[10:20]", "train[-10%:]",
// "train[:50%]+test": percents rounded to the closest record as TFDS's
// default rounding does (Python's round, ties to even), absolute bounds
// and negative ones from the end.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_TFDS_H_
#define PSTRAIN_DATA_TFDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/record_range.h"

namespace pstrain::data {

struct TfdsFeature {
  std::string name;  // "image", "image/filename", "label"
  // The connector's class, its last name: "Image", "ClassLabel", "Text",
  // "Tensor", "Scalar", ...
  std::string kind;
  std::vector<int64_t> shape;            // -1 where the size varies
  std::string dtype;                     // "uint8", "int64", ...
  std::string encoding;                  // an Image's: "png", "jpeg", or "" (TFDS's default, png)
  int64_t num_classes = 0;               // a ClassLabel's
  std::vector<std::string> class_names;  // from NAME.labels.txt, when there
};

struct TfdsSplit {
  std::string name;
  std::vector<int64_t> shard_lengths;
  std::vector<std::string> files;  // its shards, in order
  int64_t examples() const;
};

struct TfdsDataset {
  std::string dir;
  std::string name;
  std::string version;
  std::vector<TfdsSplit> splits;
  std::vector<TfdsFeature> features;
  // as_supervised=True's (input, label) features; empty when the dataset
  // names none.
  std::string supervised_input;
  std::string supervised_label;

  const TfdsSplit* FindSplit(absl::string_view name) const;
  const TfdsFeature* FindFeature(absl::string_view name) const;
  // The supervised input, else the one Image feature; the supervised
  // label, else the one ClassLabel. nullptr when neither says.
  const TfdsFeature* ImageFeature() const;
  const TfdsFeature* LabelFeature() const;
  // The one feature of `kind` ("Image"); nullptr for none or several.
  const TfdsFeature* OnlyOfKind(absl::string_view kind) const;
};

// Whether `dir` holds a dataset_info.json.
bool IsTfdsDirectory(const std::string& dir);

// Reads the version directory `dir`. NotFound naming the file for a
// missing dataset_info.json, features.json or shard; InvalidArgument
// naming the file and the field for JSON that does not say what TFDS
// writes, and for a split whose shards on disk are not the count
// dataset_info.json gives.
absl::StatusOr<TfdsDataset> ReadTfdsDirectory(const std::string& dir);

// The records `spec` selects, shard by shard in order (a shard wholly
// outside the slice left out). InvalidArgument naming the spec for bad
// syntax, an unknown split (listing the dataset's), a percent outside
// -100..100 or a bound outside the split, as TFDS refuses them.
absl::StatusOr<std::vector<RecordRange>> ResolveSplit(const TfdsDataset& dataset,
                                                      absl::string_view spec);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_TFDS_H_
