// What a job reads from each example, as TensorFlow's feature columns say
// it: named features, each a float vector or a sequence of ids, and a
// label. Every input format (TFRecord of tf.train.Example, CSV) is decoded
// through a spec into the same layout, so a model never knows where its
// examples came from:
//   dense  floats: each float feature in spec order, `width()` values each
//   ids    int64:  each id feature (int64, string) in spec order, `width()`
//                  ids each; 0 pads a variable-length feature
//   label  int32:  a class in [0, num_classes)
// Thread-compatible; a built ExampleDecoder is immutable and thread-safe.
#ifndef PSTRAIN_DATA_FEATURE_SPEC_H_
#define PSTRAIN_DATA_FEATURE_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/example_parser.h"
#include "data/image_resize.h"

namespace pstrain::data {

enum class FeatureType { kFloat, kInt64, kString };

// How a float feature's values are stored in an Example. kValues: a
// float_list (or int64_list) of the values themselves. The others hold one
// bytes_list value that decodes to them, as TensorFlow's ops decode it:
//   kRawUint8    one byte per value (tf.io.decode_raw(x, tf.uint8)), the
//                layout of TensorFlow's MNIST convert_to_records ("image_raw")
//   kRawFloat32  4 little-endian bytes per value (tf.io.decode_raw(x,
//                tf.float32))
//   kPng         a PNG image (tf.io.decode_png(x)): height x width x channels
//                bytes, row-major, channels as stored (a palette expanded to
//                RGB, or RGBA with transparency; 16-bit samples scaled to
//                8), as TensorFlow Datasets stores images
//   kJpeg        a JPEG image (tf.io.decode_jpeg(x), data/jpeg_image.h): 1
//                channel for a grayscale image, else 3 (RGB)
//   kImage       either, told apart by their first bytes (tf.io.decode_image)
// An image feature (kPng, kJpeg, kImage) with an image_shape is brought to
// it (data/image_resize.h): channels first (gray repeated into RGB, an
// alpha channel dropped; a JPEG converted by libjpeg as decode_jpeg's
// `channels` does), then the size, as tf.image.resize with `resize`'s
// method. Without one, each image must hold `length` values as decoded.
enum class FeatureDecode { kValues, kRawUint8, kRawFloat32, kPng, kJpeg, kImage };

// "raw_uint8", "raw_float32", "png", "jpeg", "image" (and "" for kValues);
// InvalidArgument naming anything else.
absl::StatusOr<FeatureDecode> ParseFeatureDecode(absl::string_view name);
const char* FeatureDecodeName(FeatureDecode decode);

// "float", "int64", "string"; InvalidArgument naming anything else.
absl::StatusOr<FeatureType> ParseFeatureType(absl::string_view name);
const char* FeatureTypeName(FeatureType type);

struct FeatureDef {
  std::string name;
  FeatureType type = FeatureType::kFloat;
  // A fixed number of values (every example must have exactly this many),
  // unless max_len > 0: then any number, the first max_len kept and the
  // rest padded (floats with 0, ids with id 0).
  int64_t length = 1;
  int64_t max_len = 0;
  // A fixed-length float or int64 feature an example lacks takes this
  // value (an int64's must be integral), when given; otherwise a missing
  // feature is an error (a variable-length one is all padding).
  bool has_default = false;
  float default_value = 0;
  // Float features: every value (a default too) is multiplied by this, and
  // `offset` added, as a Keras Rescaling layer does: scale 1/255 takes
  // pixels 0..255 to [0, 1]; scale 1/127.5 with offset -1 to [-1, 1], as
  // Keras's MobileNetV2 preprocess_input does.
  float scale = 1;
  float offset = 0;
  // Float features of TFRecord input: how the Example stores the values.
  FeatureDecode decode = FeatureDecode::kValues;
  // An image feature's shape after decoding, [height, width, channels]
  // (channels 1 or 3), or empty: as decoded. `length` is then its size.
  std::vector<int64_t> image_shape;
  ResizeMethod resize = ResizeMethod::kBilinear;
  // CSV input: the column the feature reads (default: its name); a
  // feature of length N reads N columns from there on.
  std::string column;
  // Ids. int64 values are ids as they are, checked against `vocabulary`
  // (0: unchecked); or hashed, as strings are. Strings need one of:
  //   vocabulary_file  one token per line; the token on line i (from 0)
  //                    has id i + 2, 0 being padding and 1 out of
  //                    vocabulary (the files `pstrain data` writes)
  //   hash_buckets: N  id 1 + StableHash(token) % N (an int64 hashed as
  //                    its decimal text, as TensorFlow hashes integers)
  // The empty string is a missing value, as in TensorFlow's categorical
  // columns: id 0, like padding.
  std::string vocabulary_file;
  int64_t hash_buckets = 0;
  int64_t vocabulary = 0;
  // An id sequence (max_len > 0) shorter than max_len is padded with id 0
  // at its end, or with `pad_front` at its front; a longer one keeps its
  // first max_len ids, or with `truncate_front` its last (Keras's
  // pad_sequences: padding="pre", truncating="pre").
  bool pad_front = false;
  bool truncate_front = false;

  bool is_dense() const { return type == FeatureType::kFloat; }
  bool is_image() const {
    return decode == FeatureDecode::kPng || decode == FeatureDecode::kJpeg ||
           decode == FeatureDecode::kImage;
  }
  int64_t width() const { return max_len > 0 ? max_len : length; }
};

struct FeatureSpec {
  std::vector<FeatureDef> features;
  // The label feature: an int64 (or an integral float) class.
  std::string label = "label";
};

// The checks ExampleDecoder::Create makes without reading any file (for a
// config parser); its errors.
absl::Status CheckFeatureSpec(const FeatureSpec& spec);
// The widths of the dense and id layouts.
int64_t DenseWidth(const FeatureSpec& spec);
int64_t IdsWidth(const FeatureSpec& spec);

// 64-bit FNV-1a: stable across machines and releases, so ids hashed today
// name the same rows tomorrow.
uint64_t StableHash(absl::string_view bytes);

class ExampleDecoder {
 public:
  // Checks the spec and reads the vocabulary files. InvalidArgument naming
  // the feature: no name, a name given twice or equal to the label, a
  // length or max_len out of range, ids options on a float feature, a
  // string feature without vocabulary_file or hash_buckets, or both;
  // NotFound for a vocabulary file that cannot be read, InvalidArgument for
  // one that is empty or repeats a token (naming the line).
  static absl::StatusOr<std::unique_ptr<ExampleDecoder>> Create(const FeatureSpec& spec);

  const FeatureSpec& spec() const { return spec_; }
  int64_t dense_width() const { return dense_width_; }
  int64_t ids_width() const { return ids_width_; }
  // The rows an embedding table needs for feature `i`'s ids: its
  // vocabulary file's tokens + 2, hash_buckets + 1, or its vocabulary (0
  // when unchecked).
  int64_t IdRange(size_t i) const;
  // Where feature `i` starts in the dense or id layout.
  int64_t OffsetOf(size_t i) const { return offsets_[i]; }

  // Decodes one serialized Example into dense[dense_width()],
  // ids[ids_width()] and *label. `num_classes` > 0 bounds the label.
  // InvalidArgument naming the feature and the problem: the Example does
  // not parse (with the byte), a feature missing without a default, of the
  // wrong list kind, with the wrong number of values, an id outside its
  // vocabulary, a label missing, not one integral value, or out of range.
  // `parsed` is scratch (reused to avoid allocating).
  absl::Status Decode(absl::string_view example, ParsedExample* parsed, float* dense, int64_t* ids,
                      int32_t* label, int64_t num_classes) const;

  // Float feature `i`'s one encoded value (its decode's: an image file's
  // bytes, say) into dense[i's width], decoded, brought to its
  // image_shape, checked, scaled and offset as Decode does it in an
  // Example. REQUIRES: feature i decodes (decode is not kValues). Decode's
  // errors for the value.
  absl::Status DecodeEncoded(size_t i, absl::string_view value, float* dense) const;

  // The id of a token of feature `i` (a string or an int64's decimal text).
  int64_t IdOf(size_t i, absl::string_view token) const;
  // The id of int64 feature `i`'s value: hashed, or the value itself when
  // it is inside the feature's vocabulary (InvalidArgument naming the
  // feature otherwise).
  absl::StatusOr<int64_t> IdOfValue(size_t i, int64_t value) const;

 private:
  explicit ExampleDecoder(FeatureSpec spec) : spec_(std::move(spec)) {}
  absl::Status DecodeFeature(size_t i, const FeatureView* view, float* dense, int64_t* ids) const;

  FeatureSpec spec_;
  int64_t dense_width_ = 0;
  int64_t ids_width_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<absl::flat_hash_map<std::string, int64_t>> vocabularies_;  // per feature
};

// Places the first `n` ids of an id sequence of `f` (n < f.width(): the
// rest padding) as f's padding says: at the front with id 0 before them
// (pad_front), else followed by 0s. Nothing for n >= f.width().
void PadIds(const FeatureDef& f, int64_t n, int64_t* ids);

// An id sequence of `f` read one token at a time into ids[0, f.width()):
// PutSequenceId the n-th (from 0) id as it comes (past the width: dropped,
// or with truncate_front written over the oldest, a ring), then
// FinishSequence with the count, which puts the ring in order and pads
// (PadIds).
void PutSequenceId(const FeatureDef& f, int64_t n, int64_t id, int64_t* ids);
void FinishSequence(const FeatureDef& f, int64_t n, int64_t* ids);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_FEATURE_SPEC_H_
