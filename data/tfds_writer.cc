#include "data/tfds_writer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "data/image_resize.h"
#include "data/jpeg_image.h"
#include "data/tfrecord.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// Fashion-MNIST's classes, as TFDS's fashion_mnist names them.
constexpr const char* kClassNames[10] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                         "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                         "Bag",         "Ankle boot"};

// An image's colour: each channel's share of the grey, drawn per image
// (never from its class, which the colour would then give away).
struct Tint {
  float r, g, b;
};
Tint DrawTint(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> share(0.6f, 1.0f);
  const float r = share(rng), g = share(rng);
  return {r, g, share(rng)};
}

// One 28x28 grey image as an RGB JPEG of `h` x `w`.
absl::StatusOr<std::string> PhotoOf(const uint8_t* grey, int64_t side_h, int64_t side_w, int64_t h,
                                    int64_t w, const Tint& t) {
  std::vector<float> resized(static_cast<size_t>(h * w));
  ResizeImage(grey, ImageSize{side_h, side_w, 1}, h, w, ResizeMethod::kBilinear, resized.data());
  std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
  auto byte = [](float v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); };
  for (int64_t p = 0; p < h * w; ++p) {
    rgb[3 * p] = byte(resized[p] * t.r);
    rgb[3 * p + 1] = byte(resized[p] * t.g);
    rgb[3 * p + 2] = byte(resized[p] * t.b);
  }
  JpegOptions jpeg;
  jpeg.quality = 90;
  return EncodeJpeg(rgb.data(), h, w, 3, jpeg);
}

Json DatasetInfo(const TfdsWriteOptions& o, const std::vector<int64_t>& lengths, int64_t bytes) {
  Json shard_lengths = Json::array();
  for (int64_t n : lengths) shard_lengths.push_back(absl::StrCat(n));
  return Json{
      {"citation", ""},
      {"description",
       "Fashion-MNIST as RGB JPEG photos of varying size (pstrain data to-tfds), in one train "
       "split: the 60,000 training images, then the 10,000 test images."},
      {"fileFormat", "tfrecord"},
      {"moduleName", "pstrain.data.to_tfds"},
      {"name", o.name},
      {"releaseNotes", Json::object()},
      {"splits",
       Json::array({Json{{"filepathTemplate", "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"},
                         {"name", "train"},
                         {"numBytes", absl::StrCat(bytes)},
                         {"shardLengths", shard_lengths}}})},
      {"supervisedKeys",
       Json{{"tuple", Json{{"items", Json::array({Json{{"featureKey", "image"}},
                                                  Json{{"featureKey", "label"}}})}}}}},
      {"version", o.version}};
}

Json Features() {
  const std::string prefix = "tensorflow_datasets.core.features.";
  return Json{{"featuresDict",
               Json{{"features",
                     Json{{"image",
                           Json{{"description", ""},
                                {"image", Json{{"dtype", "uint8"},
                                               {"encodingFormat", "jpeg"},
                                               {"shape", Json{{"dimensions", {"-1", "-1", "3"}}}}}},
                                {"pythonClassName", prefix + "image_feature.Image"}}},
                          {"image/filename", Json{{"pythonClassName", prefix + "text_feature.Text"},
                                                  {"text", Json::object()}}},
                          {"label", Json{{"classLabel", Json{{"numClasses", "10"}}},
                                         {"pythonClassName",
                                          prefix + "class_label_feature.ClassLabel"}}}}}}},
              {"pythonClassName", prefix + "features_dict.FeaturesDict"}};
}

}  // namespace

absl::StatusOr<TfdsWritten> WriteIdxAsTfds(const std::string& idx_dir, const std::string& out,
                                           const TfdsWriteOptions& options) {
  if (options.size < 8 || options.size > 4096 || options.spread < 0 ||
      options.spread > options.size - 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", options.size, " with spread ", options.spread,
                     ": give a size in 8..4096 and a spread in 0..size-4"));
  }
  // The images as bytes: the training set then the test set.
  PSTRAIN_ASSIGN_OR_RETURN(ReplicaData train,
                           LoadReplicaData(idx_dir, Split::kTrain, 0, 1, /*pixels_as_bytes=*/true));
  PSTRAIN_ASSIGN_OR_RETURN(ReplicaData test,
                           LoadReplicaData(idx_dir, Split::kTest, 0, 1, /*pixels_as_bytes=*/true));
  const int64_t dim = train.dataset.example_dim;
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(dim))));
  if (side * side != dim || train.dataset.pixels.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(idx_dir, ": images of ", dim, " bytes are not square grey images"));
  }
  int64_t n = train.dataset.num_examples + test.dataset.num_examples;
  if (options.max_examples > 0) n = std::min(n, options.max_examples);
  if (options.shards < 1 || options.shards > std::min<int64_t>(n, 99999)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards ", options.shards, " is not in 1..", std::min<int64_t>(n, 99999)));
  }
  TfdsWritten written;
  written.dir = absl::StrCat(out, "/", options.name, "/", options.version);
  if (std::filesystem::exists(written.dir + "/dataset_info.json")) {
    return absl::FailedPreconditionError(
        absl::StrCat(written.dir, " holds a data set already (dataset_info.json)"));
  }
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(written.dir));
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int64_t> jitter(-options.spread, options.spread);
  written.min_side = options.size + options.spread;
  written.max_side = 0;
  int64_t bytes = 0;
  for (int s = 0; s < options.shards; ++s) {
    const std::string path = absl::StrFormat("%s/%s-train.tfrecord-%05d-of-%05d", written.dir,
                                             options.name, s, options.shards);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, Compression::kNone));
    const int64_t begin = s * n / options.shards, end = (s + 1) * n / options.shards;
    for (int64_t e = begin; e < end; ++e) {
      const bool from_train = e < train.dataset.num_examples;
      const Dataset& ds = from_train ? train.dataset : test.dataset;
      const int64_t i = from_train ? e : e - train.dataset.num_examples;
      const int64_t h = options.size + jitter(rng), w = options.size + jitter(rng);
      const Tint tint = DrawTint(rng);
      written.min_side = std::min({written.min_side, h, w});
      written.max_side = std::max({written.max_side, h, w});
      PSTRAIN_ASSIGN_OR_RETURN(std::string jpeg,
                               PhotoOf(ds.pixels.data() + i * dim, side, side, h, w, tint));
      v1::Example example;
      auto& features = *example.mutable_features()->mutable_feature();
      features["image"].mutable_bytes_list()->add_value(std::move(jpeg));
      features["image/filename"].mutable_bytes_list()->add_value(
          absl::StrFormat("%s_%05d.jpg", from_train ? "train" : "test", i));
      features["label"].mutable_int64_list()->add_value(ds.labels[i]);
      const std::string record = example.SerializeAsString();
      bytes += static_cast<int64_t>(record.size());
      PSTRAIN_RETURN_IF_ERROR(writer->Write(record));
    }
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    written.files.push_back(path);
    written.shard_lengths.push_back(end - begin);
  }
  std::string names;
  for (const char* name : kClassNames) absl::StrAppend(&names, name, "\n");
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(written.dir + "/label.labels.txt", names));
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(written.dir + "/features.json", Features().dump(2)));
  // Last: a directory with its dataset_info.json is whole.
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileAtomically(written.dir + "/dataset_info.json",
                          DatasetInfo(options, written.shard_lengths, bytes).dump(2)));
  return written;
}

}  // namespace pstrain::data
