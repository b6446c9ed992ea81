#include "data/dataset.h"

#include <algorithm>
#include <numeric>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/idx_reader.h"

namespace pstrain::data {
namespace {

std::string FindFile(const std::string& dir, const std::string& stem) {
  std::string gz = absl::StrCat(dir, "/", stem, ".gz");
  if (std::ifstream(gz).good()) return gz;
  return absl::StrCat(dir, "/", stem);
}

}  // namespace

absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = FindFile(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = FindFile(dir, prefix + "-labels-idx1-ubyte");
  PSTRAIN_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  PSTRAIN_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() < 2) {
    return absl::DataLossError(absl::StrCat(
        "IDX file ", images_path, ": images need rank 2 or more, got rank ",
        images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return absl::DataLossError(absl::StrCat(
        "IDX file ", labels_path, ": labels need rank 1, got rank ",
        labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::DataLossError(absl::StrCat(
        images_path, " has ", images.dims[0], " images but ", labels_path,
        " has ", labels.dims[0], " labels"));
  }
  Dataset ds;
  ds.num_examples = images.dims[0];
  ds.example_dim = 1;
  for (size_t i = 1; i < images.dims.size(); ++i) ds.example_dim *= images.dims[i];
  ds.features.resize(images.values.size());
  for (size_t i = 0; i < images.values.size(); ++i) {
    ds.features[i] = images.values[i] * (1.0f / 255.0f);
  }
  ds.labels.resize(ds.num_examples);
  for (int64_t i = 0; i < ds.num_examples; ++i) {
    if (labels.values[i] > 9) {
      return absl::DataLossError(absl::StrCat(
          "IDX file ", labels_path, ": label ", int{labels.values[i]},
          " of example ", i, " is above 9"));
    }
    ds.labels[i] = labels.values[i];
  }
  return ds;
}

ShardIterator::ShardIterator(const Dataset* dataset, int replica,
                             int num_replicas, int batch_size, uint64_t seed)
    : dataset_(dataset),
      replica_(replica),
      num_replicas_(num_replicas),
      batch_size_(batch_size),
      seed_(seed),
      order_(dataset->num_examples) {
  for (int64_t i = replica; i < dataset->num_examples; i += num_replicas) {
    indices_.push_back(i);
  }
}

void ShardIterator::StartEpoch() {
  ++epoch_;
  position_ = 0;
  // The same permutation on every replica: (seed, epoch) only.
  std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32),
                    static_cast<uint32_t>(epoch_)};
  std::mt19937_64 rng(seq);
  std::iota(order_.begin(), order_.end(), int64_t{0});
  std::shuffle(order_.begin(), order_.end(), rng);
  for (size_t j = 0; j < indices_.size(); ++j) {
    indices_[j] = order_[replica_ + j * static_cast<size_t>(num_replicas_)];
  }
}

int64_t ShardIterator::Next(float* features, int32_t* labels) {
  if (epoch_ < 0 || position_ + batch_size_ > shard_size()) StartEpoch();
  const int64_t dim = dataset_->example_dim;
  for (int b = 0; b < batch_size_; ++b) {
    const int64_t idx = indices_[position_ + b];
    std::memcpy(features + b * dim, dataset_->features.data() + idx * dim,
                dim * sizeof(float));
    labels[b] = dataset_->labels[idx];
  }
  position_ += batch_size_;
  return epoch_;
}

void ShardIterator::Skip(int64_t batches) {
  for (int64_t i = 0; i < batches; ++i) {
    if (epoch_ < 0 || position_ + batch_size_ > shard_size()) StartEpoch();
    position_ += batch_size_;
  }
}

}  // namespace pstrain::data
