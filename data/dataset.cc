#include "data/dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <regex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/float_ops.h"
#include "base/status_macros.h"
#include "data/idx_reader.h"
#include "data/input_error.h"

namespace pstrain::data {
namespace {

// Anything at `path`: a directory or an unreadable file there is named
// when it is read (data/input_error.h), not passed over as missing.
bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// `dir`/`stem`.gz, or `dir`/`stem` when only that exists; empty when
// neither does.
std::string FindFile(const std::string& dir, const std::string& stem) {
  const std::string gz = absl::StrCat(dir, "/", stem, ".gz");
  if (Exists(gz)) return gz;
  const std::string plain = absl::StrCat(dir, "/", stem);
  return Exists(plain) ? plain : std::string();
}

// One pair of files, read and checked: images of rank 2 or more, labels of
// rank 1, as many of each.
absl::Status ReadPair(const std::string& images_path, const std::string& labels_path,
                      IdxArray* images_out, IdxArray* labels_out) {
  PSTRAIN_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  PSTRAIN_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() < 2) {
    return absl::DataLossError(absl::StrCat(
        "IDX file ", images_path, ": images need rank 2 or more, got rank ", images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return absl::DataLossError(absl::StrCat("IDX file ", labels_path,
                                            ": labels need rank 1, got rank ", labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::DataLossError(absl::StrCat(images_path, " has ", images.dims[0], " images but ",
                                            labels_path, " has ", labels.dims[0], " labels"));
  }
  *images_out = std::move(images);
  *labels_out = std::move(labels);
  return absl::OkStatus();
}

// One pair of files appended to `ds` (empty: takes the pair's shape), its
// images as floats or, with `as_bytes`, as they are.
absl::Status AppendPair(const std::string& images_path, const std::string& labels_path,
                        bool as_bytes, Dataset* ds) {
  IdxArray images, labels;
  PSTRAIN_RETURN_IF_ERROR(ReadPair(images_path, labels_path, &images, &labels));
  int64_t dim = 1;
  for (size_t i = 1; i < images.dims.size(); ++i) dim *= images.dims[i];
  if (ds->num_examples > 0 && dim != ds->example_dim) {
    return absl::DataLossError(absl::StrCat("IDX file ", images_path, " holds examples of ", dim,
                                            " values; the files before it, of ", ds->example_dim));
  }
  const int64_t n = images.dims[0];
  for (int64_t i = 0; i < n; ++i) {
    if (labels.values[i] > 9) {
      return absl::DataLossError(absl::StrCat("IDX file ", labels_path, ": label ",
                                              int{labels.values[i]}, " of example ", i,
                                              " is above 9"));
    }
  }
  ds->example_dim = dim;
  if (as_bytes && ds->pixels.empty()) {
    ds->pixels = std::move(images.values);  // the first file: no second copy
  } else if (as_bytes) {
    ds->pixels.insert(ds->pixels.end(), images.values.begin(), images.values.end());
  } else {
    const size_t at = ds->features.size();
    ds->features.resize(at + images.values.size());
    BytesToFloats(images.values.data(), static_cast<int64_t>(images.values.size()), kPixelScale,
                  ds->features.data() + at);
  }
  ds->labels.insert(ds->labels.end(), labels.values.begin(), labels.values.end());
  ds->num_examples += n;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SplitFiles> FindSplitFiles(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_stem = prefix + "-images-idx3-ubyte";
  const std::string labels_stem = prefix + "-labels-idx1-ubyte";
  // Sharded files: the count is the largest NNNNN an image file's name
  // gives, and every one of that many pairs must be there.
  static const std::regex kShard(R"(-(\d{5})-of-(\d{5})(\.gz)?$)");
  int num_files = 0;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return NoSuchDataDirectory(dir, absl::StrCat(dir, "/", images_stem, "[.gz]"));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (absl::StartsWith(name, images_stem + "-") && std::regex_search(name, m, kShard) &&
        m.position(0) == static_cast<long>(images_stem.size())) {
      num_files = std::max(num_files, std::stoi(m[2].str()));
    }
  }
  SplitFiles files;
  const std::string single_images = FindFile(dir, images_stem);
  if (num_files == 0) {
    if (single_images.empty()) return NoFileMatches(absl::StrCat(dir, "/", images_stem, "[.gz]"));
    const std::string single_labels = FindFile(dir, labels_stem);
    if (single_labels.empty()) {
      return NoFileMatches(
          absl::StrCat(dir, "/", labels_stem, "[.gz] (the labels of ", single_images, ")"));
    }
    files.images = {single_images};
    files.labels = {single_labels};
    return files;
  }
  if (!single_images.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " holds both ", single_images, " and ", num_files, " sharded ", images_stem,
        "-SSSSS-of-", absl::StrFormat("%05d", num_files), " files: keep one form"));
  }
  for (int i = 0; i < num_files; ++i) {
    const std::string suffix = absl::StrFormat("-%05d-of-%05d", i, num_files);
    const std::string images = FindFile(dir, images_stem + suffix);
    const std::string labels = FindFile(dir, labels_stem + suffix);
    if (images.empty() || labels.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, "/", images.empty() ? images_stem : labels_stem, suffix,
                       "[.gz] is missing: the split has ", num_files, " files"));
    }
    files.images.push_back(images);
    files.labels.push_back(labels);
  }
  return files;
}

absl::StatusOr<Dataset> LoadMnistFormat(const std::string& dir, Split split) {
  PSTRAIN_ASSIGN_OR_RETURN(SplitFiles files, FindSplitFiles(dir, split));
  Dataset ds;
  for (size_t i = 0; i < files.images.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(AppendPair(files.images[i], files.labels[i], false, &ds));
  }
  return ds;
}

absl::StatusOr<ReplicaData> LoadReplicaData(const std::string& dir, Split split, int replica,
                                            int num_replicas, bool pixels_as_bytes) {
  PSTRAIN_ASSIGN_OR_RETURN(SplitFiles files, FindSplitFiles(dir, split));
  ReplicaData out;
  out.files_total = static_cast<int>(files.images.size());
  out.by_file = ShardsByFile(out.files_total, num_replicas);
  for (int i = 0; i < out.files_total; ++i) {
    if (!out.by_file || i % num_replicas == replica) {
      PSTRAIN_RETURN_IF_ERROR(
          AppendPair(files.images[i], files.labels[i], pixels_as_bytes, &out.dataset));
      ++out.files_read;
    }
    if (out.by_file && i % num_replicas != replica) {
      PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIdxDims(files.images[i]));
      out.split_examples += dims[0];
    }
  }
  out.split_examples += out.dataset.num_examples;
  return out;
}

namespace {

// Every file of a split, concatenated as raw IDX arrays.
absl::Status ReadSplitRaw(const SplitFiles& files, IdxArray* images, IdxArray* labels) {
  for (size_t i = 0; i < files.images.size(); ++i) {
    IdxArray im, lb;
    PSTRAIN_RETURN_IF_ERROR(ReadPair(files.images[i], files.labels[i], &im, &lb));
    if (i == 0) {
      *images = std::move(im);
      *labels = std::move(lb);
      continue;
    }
    if (!std::equal(im.dims.begin() + 1, im.dims.end(), images->dims.begin() + 1,
                    images->dims.end())) {
      return absl::DataLossError(
          absl::StrCat(files.images[i], " holds examples of another shape than the files before"));
    }
    images->dims[0] += im.dims[0];
    images->values.insert(images->values.end(), im.values.begin(), im.values.end());
    labels->dims[0] += lb.dims[0];
    labels->values.insert(labels->values.end(), lb.values.begin(), lb.values.end());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> WriteShardedCopy(const std::string& dir,
                                                      const std::string& out, int files) {
  std::error_code ec;
  if (std::filesystem::equivalent(dir, out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(out, " is the data directory itself"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(SplitFiles train_files, FindSplitFiles(dir, Split::kTrain));
  PSTRAIN_ASSIGN_OR_RETURN(SplitFiles test_files, FindSplitFiles(dir, Split::kTest));
  IdxArray images, labels;
  PSTRAIN_RETURN_IF_ERROR(ReadSplitRaw(train_files, &images, &labels));
  const int64_t n = images.dims[0];
  if (files < 1 || files > std::min<int64_t>(n, 99999)) {
    return absl::InvalidArgumentError(
        absl::StrCat("files=", files, ": must be from 1 to ", std::min<int64_t>(n, 99999),
                     " (the training examples, one at least per file)"));
  }
  std::vector<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "train-") || absl::StartsWith(name, "t10k-")) {
      present.push_back(name);
    }
  }
  if (!present.empty()) {
    std::sort(present.begin(), present.end());
    return absl::FailedPreconditionError(absl::StrCat(
        out, " already holds ", present[0], ": write the copy to a directory without data files"));
  }
  ec.clear();
  std::filesystem::create_directories(out, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", out, ": ", ec.message()));
  }
  const int64_t per_example = static_cast<int64_t>(images.values.size()) / n;
  std::vector<int64_t> counts;
  for (int i = 0; i < files; ++i) {
    const int64_t begin = i * n / files, end = (i + 1) * n / files;
    IdxArray im, lb;
    im.dims = images.dims;
    im.dims[0] = end - begin;
    im.values.assign(images.values.begin() + begin * per_example,
                     images.values.begin() + end * per_example);
    lb.dims = {end - begin};
    lb.values.assign(labels.values.begin() + begin, labels.values.begin() + end);
    const std::string suffix = absl::StrFormat("-%05d-of-%05d.gz", i, files);
    PSTRAIN_RETURN_IF_ERROR(WriteIdxFile(out + "/train-images-idx3-ubyte" + suffix, im));
    PSTRAIN_RETURN_IF_ERROR(WriteIdxFile(out + "/train-labels-idx1-ubyte" + suffix, lb));
    counts.push_back(end - begin);
  }
  PSTRAIN_RETURN_IF_ERROR(ReadSplitRaw(test_files, &images, &labels));
  PSTRAIN_RETURN_IF_ERROR(WriteIdxFile(out + "/t10k-images-idx3-ubyte.gz", images));
  PSTRAIN_RETURN_IF_ERROR(WriteIdxFile(out + "/t10k-labels-idx1-ubyte.gz", labels));
  return counts;
}

ShardIterator::ShardIterator(const Dataset* dataset, int replica, int num_replicas, int batch_size,
                             uint64_t seed)
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

void HoldAsFloats(Dataset* ds) {
  if (!ds->features.empty() || ds->pixels.empty()) return;
  ds->features.resize(ds->pixels.size());
  BytesToFloats(ds->pixels.data(), static_cast<int64_t>(ds->pixels.size()), ds->pixel_scale,
                ds->features.data());
  std::vector<uint8_t>().swap(ds->pixels);
}

void CopyFeatures(const Dataset& ds, int64_t first, int64_t count, float* out) {
  const int64_t dim = ds.example_dim;
  if (count * dim == 0) return;  // ids only: no dense features
  if (ds.features.empty() && !ds.pixels.empty()) {
    BytesToFloats(ds.pixels.data() + first * dim, count * dim, ds.pixel_scale, out);
  } else {
    std::memcpy(out, ds.features.data() + first * dim, count * dim * sizeof(float));
  }
}

absl::StatusOr<int64_t> ShardIterator::Next(float* features, int32_t* labels, int64_t* ids) {
  if (epoch_ < 0 || position_ + batch_size_ > shard_size()) StartEpoch();
  const int64_t dim = dataset_->example_dim;
  const int64_t ids_dim = ids == nullptr ? 0 : dataset_->ids_dim;
  for (int b = 0; b < batch_size_; ++b) {
    const int64_t idx = indices_[position_ + b];
    CopyFeatures(*dataset_, idx, 1, features + b * dim);
    if (ids_dim > 0) {
      std::memcpy(ids + b * ids_dim, dataset_->ids.data() + idx * ids_dim,
                  ids_dim * sizeof(int64_t));
    }
    labels[b] = dataset_->labels[idx];
  }
  position_ += batch_size_;
  return epoch_;
}

absl::Status ShardIterator::Seek(int64_t batch) {
  epoch_ = -1;
  position_ = 0;
  if (batch == 0 || batches_per_epoch() == 0) return absl::OkStatus();
  // Batch k of an epoch ends at position (k + 1) x batch_size.
  epoch_ = (batch - 1) / batches_per_epoch() - 1;
  StartEpoch();
  position_ = ((batch - 1) % batches_per_epoch() + 1) * batch_size_;
  return absl::OkStatus();
}

}  // namespace pstrain::data
