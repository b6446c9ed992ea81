#include "data/feature_spec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/base/config.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/float_ops.h"
#include "data/image_decode.h"

namespace pstrain::data {
namespace {

constexpr int64_t kMaxWidth = int64_t{1} << 24;
constexpr int64_t kMaxBuckets = int64_t{1} << 40;
constexpr int64_t kMaxSide = 65500;  // libjpeg's bound on a side
// The values an image brought to an image_shape may decode to (a 4,000 x
// 5,000 RGB photo is 60 million).
constexpr int64_t kMaxDecodedImage = int64_t{1} << 26;

absl::Status BadFeature(const FeatureDef& f, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("feature \"", f.name, "\": ", what));
}

// The tokens of a vocabulary file, one per line, by id.
absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> ReadVocabulary(const FeatureDef& f) {
  auto text = ReadFile(f.vocabulary_file);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("feature \"", f.name, "\": vocabulary_file ", text.status().message()));
  }
  absl::flat_hash_map<std::string, int64_t> ids;
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view token = lines[i];
    if (!token.empty() && token.back() == '\r') token.remove_suffix(1);
    if (token.empty()) {
      return BadFeature(
          f, absl::StrCat("vocabulary_file ", f.vocabulary_file, " line ", i + 1, " is empty"));
    }
    if (!ids.emplace(std::string(token), static_cast<int64_t>(i) + 2).second) {
      return BadFeature(f, absl::StrCat("vocabulary_file ", f.vocabulary_file, " line ", i + 1,
                                        ": \"", token, "\" is there already"));
    }
  }
  if (ids.empty()) {
    return BadFeature(f, absl::StrCat("vocabulary_file ", f.vocabulary_file, " has no tokens"));
  }
  return ids;
}

// An image feature's image_shape: [height, width, channels], channels 1
// or 3, its size the feature's length.
absl::Status CheckImageShape(const FeatureDef& f) {
  if (!f.is_image()) {
    return BadFeature(f, "image_shape is for an image feature (decode png, jpeg or image)");
  }
  const std::vector<int64_t>& s = f.image_shape;
  if (s.size() != 3 || s[0] < 1 || s[0] > kMaxSide || s[1] < 1 || s[1] > kMaxSide ||
      (s[2] != 1 && s[2] != 3)) {
    return BadFeature(f, absl::StrCat("image_shape [", absl::StrJoin(s, ", "),
                                      "] is not [height, width, channels] with sides in 1..",
                                      kMaxSide, " and 1 or 3 channels"));
  }
  if (f.max_len != 0 || f.length != s[0] * s[1] * s[2]) {
    return BadFeature(f, absl::StrCat("image_shape [", absl::StrJoin(s, ", "), "] holds ",
                                      s[0] * s[1] * s[2], " values; the feature's length is ",
                                      f.max_len != 0 ? f.max_len : f.length));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FeatureType> ParseFeatureType(absl::string_view name) {
  if (name == "float") return FeatureType::kFloat;
  if (name == "int64") return FeatureType::kInt64;
  if (name == "string") return FeatureType::kString;
  return absl::InvalidArgumentError(
      absl::StrCat("type \"", name, "\" is not one of float, int64, string"));
}

const char* FeatureTypeName(FeatureType type) {
  switch (type) {
    case FeatureType::kFloat:
      return "float";
    case FeatureType::kInt64:
      return "int64";
    case FeatureType::kString:
      return "string";
  }
  return "?";
}

absl::StatusOr<FeatureDecode> ParseFeatureDecode(absl::string_view name) {
  if (name.empty()) return FeatureDecode::kValues;
  if (name == "raw_uint8") return FeatureDecode::kRawUint8;
  if (name == "raw_float32") return FeatureDecode::kRawFloat32;
  if (name == "png") return FeatureDecode::kPng;
  if (name == "jpeg") return FeatureDecode::kJpeg;
  if (name == "image") return FeatureDecode::kImage;
  return absl::InvalidArgumentError(absl::StrCat(
      "decode \"", name, "\" is not one of raw_uint8, raw_float32, png, jpeg, image"));
}

const char* FeatureDecodeName(FeatureDecode decode) {
  switch (decode) {
    case FeatureDecode::kValues:
      return "values";
    case FeatureDecode::kRawUint8:
      return "raw_uint8";
    case FeatureDecode::kRawFloat32:
      return "raw_float32";
    case FeatureDecode::kPng:
      return "png";
    case FeatureDecode::kJpeg:
      return "jpeg";
    case FeatureDecode::kImage:
      return "image";
  }
  return "?";
}

uint64_t StableHash(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

absl::Status CheckFeatureSpec(const FeatureSpec& spec) {
  if (spec.label.empty()) return absl::InvalidArgumentError("the label feature has no name");
  absl::flat_hash_set<std::string> names;
  for (const FeatureDef& f : spec.features) {
    if (f.name.empty()) return absl::InvalidArgumentError("a feature has no name");
    if (f.name == spec.label) return BadFeature(f, "is the label too");
    if (!names.insert(f.name).second) return BadFeature(f, "is given twice");
    if (f.max_len < 0 || f.max_len > kMaxWidth) {
      return BadFeature(f, absl::StrCat("max_len ", f.max_len, " is not in 0..", kMaxWidth));
    }
    if (f.max_len == 0 && (f.length < 1 || f.length > kMaxWidth)) {
      return BadFeature(f, absl::StrCat("length ", f.length, " is not in 1..", kMaxWidth));
    }
    if ((f.pad_front || f.truncate_front) && (f.max_len == 0 || f.is_dense())) {
      return BadFeature(f, "padding and truncating are for a sequence of ids (an int64 or string "
                           "feature with max_len)");
    }
    if (f.hash_buckets < 0 || f.hash_buckets > kMaxBuckets || f.vocabulary < 0) {
      return BadFeature(
          f, absl::StrCat("hash_buckets must be in 0..", kMaxBuckets, " and vocabulary 0 or more"));
    }
    if (!std::isfinite(f.scale) || f.scale == 0) {
      return BadFeature(f, absl::StrCat("scale ", f.scale, " must be a finite number, not 0"));
    }
    if (f.scale != 1 && f.type != FeatureType::kFloat) {
      return BadFeature(f, "scale is for float features");
    }
    if (!std::isfinite(f.offset)) {
      return BadFeature(f, absl::StrCat("offset ", f.offset, " must be a finite number"));
    }
    if (f.offset != 0 && f.type != FeatureType::kFloat) {
      return BadFeature(f, "offset is for float features");
    }
    if (!f.image_shape.empty()) {
      if (absl::Status s = CheckImageShape(f); !s.ok()) return s;
    }
    if (f.decode != FeatureDecode::kValues && f.type != FeatureType::kFloat) {
      return BadFeature(f, absl::StrCat("decode ", FeatureDecodeName(f.decode),
                                        " gives floats: it is for a float feature"));
    }
    const bool ids_options = !f.vocabulary_file.empty() || f.hash_buckets > 0 || f.vocabulary > 0;
    switch (f.type) {
      case FeatureType::kFloat:
        if (ids_options) {
          return BadFeature(f,
                            "a float feature takes no vocabulary_file, hash_buckets or "
                            "vocabulary (those map ids)");
        }
        break;
      case FeatureType::kInt64:
        if (!f.vocabulary_file.empty()) {
          return BadFeature(f,
                            "an int64 feature's values are ids already: give vocabulary "
                            "(their range) or hash_buckets, not vocabulary_file");
        }
        if (f.hash_buckets > 0 && f.vocabulary > 0) {
          return BadFeature(f, "give hash_buckets or vocabulary, not both");
        }
        break;
      case FeatureType::kString:
        if (f.vocabulary_file.empty() == (f.hash_buckets == 0) || f.vocabulary > 0) {
          return BadFeature(f,
                            "a string feature needs one of vocabulary_file and hash_buckets "
                            "to map its tokens to ids");
        }
        break;
    }
    if (f.has_default && (f.type == FeatureType::kString || f.max_len > 0)) {
      return BadFeature(f, "only a fixed-length float or int64 feature takes a default_value");
    }
    if (f.has_default && f.type == FeatureType::kInt64 &&
        !(std::floor(f.default_value) == f.default_value && std::abs(f.default_value) < 1e15f)) {
      return BadFeature(f, absl::StrCat("default_value ", f.default_value,
                                        " is not an integer, as an int64 feature's must be"));
    }
  }
  return absl::OkStatus();
}

int64_t DenseWidth(const FeatureSpec& spec) {
  int64_t w = 0;
  for (const FeatureDef& f : spec.features) w += f.is_dense() ? f.width() : 0;
  return w;
}

int64_t IdsWidth(const FeatureSpec& spec) {
  int64_t w = 0;
  for (const FeatureDef& f : spec.features) w += f.is_dense() ? 0 : f.width();
  return w;
}

absl::StatusOr<std::unique_ptr<ExampleDecoder>> ExampleDecoder::Create(const FeatureSpec& spec) {
  if (absl::Status s = CheckFeatureSpec(spec); !s.ok()) return s;
  std::unique_ptr<ExampleDecoder> d(new ExampleDecoder(spec));
  for (const FeatureDef& f : spec.features) {
    absl::flat_hash_map<std::string, int64_t> vocabulary;
    if (!f.vocabulary_file.empty()) {
      auto v = ReadVocabulary(f);
      if (!v.ok()) return v.status();
      vocabulary = std::move(*v);
    }
    if (f.is_dense()) {
      d->offsets_.push_back(d->dense_width_);
      d->dense_width_ += f.width();
    } else {
      d->offsets_.push_back(d->ids_width_);
      d->ids_width_ += f.width();
    }
    d->vocabularies_.push_back(std::move(vocabulary));
  }
  return d;
}

int64_t ExampleDecoder::IdRange(size_t i) const {
  const FeatureDef& f = spec_.features[i];
  if (!f.vocabulary_file.empty()) return static_cast<int64_t>(vocabularies_[i].size()) + 2;
  if (f.hash_buckets > 0) return f.hash_buckets + 1;
  return f.vocabulary;
}

int64_t ExampleDecoder::IdOf(size_t i, absl::string_view token) const {
  const FeatureDef& f = spec_.features[i];
  if (token.empty() && f.type == FeatureType::kString) return 0;
  if (f.hash_buckets > 0) {
    return 1 + static_cast<int64_t>(StableHash(token) % static_cast<uint64_t>(f.hash_buckets));
  }
  auto it = vocabularies_[i].find(token);
  return it == vocabularies_[i].end() ? 1 : it->second;
}

absl::StatusOr<int64_t> ExampleDecoder::IdOfValue(size_t i, int64_t value) const {
  const FeatureDef& f = spec_.features[i];
  if (f.hash_buckets > 0) return IdOf(i, absl::StrCat(value));
  if (value < 0 || (f.vocabulary > 0 && value >= f.vocabulary)) {
    return BadFeature(
        f, absl::StrCat("id ", value, " is outside its vocabulary [0, ", f.vocabulary, ")"));
  }
  return value;
}

void PadIds(const FeatureDef& f, int64_t n, int64_t* ids) {
  const int64_t width = f.width();
  if (n >= width) return;
  if (f.pad_front) {
    std::copy_backward(ids, ids + n, ids + width);
    std::fill(ids, ids + width - n, int64_t{0});
  } else {
    std::fill(ids + n, ids + width, int64_t{0});
  }
}

void PutSequenceId(const FeatureDef& f, int64_t n, int64_t id, int64_t* ids) {
  const int64_t width = f.width();
  if (n < width) {
    ids[n] = id;
  } else if (f.truncate_front) {
    ids[n % width] = id;  // the last `width`, in a ring
  }
}

void FinishSequence(const FeatureDef& f, int64_t n, int64_t* ids) {
  const int64_t width = f.width();
  if (f.truncate_front && n > width) std::rotate(ids, ids + n % width, ids + width);
  PadIds(f, n, ids);
}

namespace {

// An image feature's one encoded value: decoded, brought to its
// image_shape when it has one, into `dense` (unscaled) and its count into
// *n.
absl::Status DecodeImageFeature(const FeatureDef& f, absl::string_view value, float* dense,
                                int64_t* n) {
  const ImageCodec codec = f.decode == FeatureDecode::kPng    ? ImageCodec::kPng
                           : f.decode == FeatureDecode::kJpeg ? ImageCodec::kJpeg
                                                              : ImageCodec::kEither;
  const std::vector<int64_t>& want = f.image_shape;
  const int channels = want.empty() ? 0 : static_cast<int>(want[2]);
  // Each thread's pixels, kept between records: no allocation per image.
  thread_local std::vector<uint8_t> pixels;
  absl::StatusOr<ImageSize> got = DecodeImagePixels(
      value, codec, channels, want.empty() ? kMaxWidth : kMaxDecodedImage, &pixels);
  if (!got.ok()) return BadFeature(f, got.status().message());
  if (want.empty()) {
    *n = got->height * got->width * got->channels;
    if (f.max_len == 0 && *n != f.length) {
      return BadFeature(f, absl::StrCat("is a ", got->height, "x", got->width, "x", got->channels,
                                        " image, ", *n, " values; the spec says length ", f.length,
                                        " (give image_shape to resize it)"));
    }
    BytesToFloats(pixels.data(), std::min(*n, f.width()), 1.0f, dense);
    return absl::OkStatus();
  }
  *n = f.length;
  if (got->height == want[0] && got->width == want[1]) {
    BytesToFloats(pixels.data(), *n, 1.0f, dense);
  } else {
    ResizeImage(pixels.data(), *got, want[0], want[1], f.resize, dense);
  }
  return absl::OkStatus();
}

// A float feature's one encoded value (f.decode): its first min(count,
// width) values into `dense`, unscaled, and their count into *n.
absl::Status DecodeValue(const FeatureDef& f, absl::string_view value, float* dense, int64_t* n) {
  const int64_t width = f.width();
  switch (f.decode) {
    case FeatureDecode::kValues:
      break;
    case FeatureDecode::kRawUint8: {
      *n = static_cast<int64_t>(value.size());
      const auto* bytes = reinterpret_cast<const uint8_t*>(value.data());
      BytesToFloats(bytes, std::min(*n, width), 1.0f, dense);
      break;
    }
    case FeatureDecode::kRawFloat32: {
      static_assert(ABSL_IS_LITTLE_ENDIAN, "raw_float32 is read as little-endian floats");
      if (value.size() % sizeof(float) != 0) {
        return BadFeature(f, absl::StrCat("has ", value.size(),
                                          " bytes, not a whole number of raw_float32 values (4 "
                                          "bytes each)"));
      }
      *n = static_cast<int64_t>(value.size() / sizeof(float));
      std::memcpy(dense, value.data(), std::min(*n, width) * sizeof(float));
      break;
    }
    case FeatureDecode::kPng:
    case FeatureDecode::kJpeg:
    case FeatureDecode::kImage:
      return DecodeImageFeature(f, value, dense, n);
  }
  return absl::OkStatus();
}

// A float feature stored as one encoded bytes_list value: that value.
absl::StatusOr<absl::string_view> EncodedValue(const FeatureDef& f, const FeatureView& view) {
  const char* decode = FeatureDecodeName(f.decode);
  if (view.kind != ListKind::kBytes) {
    return BadFeature(f, absl::StrCat("is a ", ListKindName(view.kind), "; decode ", decode,
                                      " needs a bytes_list of one value"));
  }
  absl::string_view value;
  int64_t values = 0;
  auto got = ReadBytes(view, [&](absl::string_view v) {
    if (values++ == 0) value = v;
  });
  if (!got.ok()) return BadFeature(f, got.status().message());
  if (values != 1) {
    return BadFeature(f, absl::StrCat("has ", values, " bytes_list values; decode ", decode,
                                      " needs one (the encoded values)"));
  }
  return value;
}

absl::Status CountError(const FeatureDef& f, int64_t n) {
  return BadFeature(f, absl::StrCat("has ", n, " values; the spec says length ", f.length,
                                    " (give max_len for a variable length)"));
}

// A float feature's `n` values read into `dense`: checked against its
// length, scaled and offset, the rest of its width padded with 0.
absl::Status FinishFloats(const FeatureDef& f, int64_t n, float* dense) {
  const int64_t width = f.width();
  if (f.max_len == 0 && n != f.length) return CountError(f, n);
  if (f.scale != 1 || f.offset != 0) {
    for (int64_t k = 0; k < std::min(n, width); ++k) dense[k] = dense[k] * f.scale + f.offset;
  }
  if (n < width) std::fill(dense + n, dense + width, 0.0f);
  return absl::OkStatus();
}

}  // namespace

absl::Status ExampleDecoder::DecodeEncoded(size_t i, absl::string_view value, float* dense) const {
  const FeatureDef& f = spec_.features[i];
  int64_t n = 0;
  if (absl::Status s = DecodeValue(f, value, dense, &n); !s.ok()) return s;
  return FinishFloats(f, n, dense);
}

absl::Status ExampleDecoder::DecodeFeature(size_t i, const FeatureView* view, float* dense,
                                           int64_t* ids) const {
  const FeatureDef& f = spec_.features[i];
  const int64_t width = f.width();
  auto count_error = [&](int64_t n) { return CountError(f, n); };
  auto kind_error = [&](absl::string_view wanted) {
    return BadFeature(f, absl::StrCat("is a ", ListKindName(view->kind),
                                      f.type == FeatureType::kInt64 ? "; an " : "; a ",
                                      FeatureTypeName(f.type), " feature needs ", wanted));
  };
  if (view == nullptr || view->kind == ListKind::kNone) {
    if (f.max_len > 0) {
      if (f.is_dense()) std::fill(dense, dense + width, 0.0f);
      if (!f.is_dense()) std::fill(ids, ids + width, int64_t{0});
      return absl::OkStatus();
    }
    if (f.has_default && f.is_dense()) {
      std::fill(dense, dense + width, f.default_value * f.scale + f.offset);
      return absl::OkStatus();
    }
    if (f.has_default) {
      absl::StatusOr<int64_t> id = IdOfValue(i, static_cast<int64_t>(f.default_value));
      if (!id.ok()) return id.status();
      std::fill(ids, ids + width, *id);
      return absl::OkStatus();
    }
    return view == nullptr ? BadFeature(f, "is missing") : count_error(0);
  }
  int64_t n = 0;
  switch (f.type) {
    case FeatureType::kFloat: {
      if (f.decode != FeatureDecode::kValues) {
        absl::StatusOr<absl::string_view> value = EncodedValue(f, *view);
        if (!value.ok()) return value.status();
        if (absl::Status s = DecodeValue(f, *value, dense, &n); !s.ok()) return s;
      } else if (view->kind == ListKind::kFloat) {
        auto got = ReadFloats(*view, dense, width);
        if (!got.ok()) return BadFeature(f, got.status().message());
        n = *got;
      } else if (view->kind == ListKind::kInt64) {
        // Integers are taken as numbers (a writer's int column).
        std::vector<int64_t> values(width);
        auto got = ReadInt64s(*view, values.data(), width);
        if (!got.ok()) return BadFeature(f, got.status().message());
        n = *got;
        for (int64_t k = 0; k < std::min(n, width); ++k) dense[k] = static_cast<float>(values[k]);
      } else {
        return kind_error("a float_list or an int64_list");
      }
      return FinishFloats(f, n, dense);
    }
    case FeatureType::kInt64: {
      if (view->kind != ListKind::kInt64) return kind_error("an int64_list");
      auto got = ReadInt64s(*view, ids, width);
      if (!got.ok()) return BadFeature(f, got.status().message());
      n = *got;
      if (f.truncate_front && n > width) {
        // The last `width` values: read them all, keep the tail.
        std::vector<int64_t> all(n);
        if (auto again = ReadInt64s(*view, all.data(), n); !again.ok()) {
          return BadFeature(f, again.status().message());
        }
        std::copy(all.end() - width, all.end(), ids);
      }
      const int64_t kept = std::min(n, width);
      for (int64_t k = 0; k < kept; ++k) {
        absl::StatusOr<int64_t> id = IdOfValue(i, ids[k]);
        if (!id.ok()) return id.status();
        ids[k] = *id;
      }
      break;
    }
    case FeatureType::kString: {
      if (view->kind != ListKind::kBytes) return kind_error("a bytes_list");
      auto got = ReadBytes(*view, [&](absl::string_view token) {
        if (n < width || f.truncate_front) PutSequenceId(f, n, IdOf(i, token), ids);
        ++n;
      });
      if (!got.ok()) return BadFeature(f, got.status().message());
      if (f.max_len == 0 && n != f.length) return count_error(n);
      FinishSequence(f, n, ids);
      return absl::OkStatus();
    }
  }
  if (f.max_len == 0 && n != f.length) return count_error(n);
  PadIds(f, n, ids);
  return absl::OkStatus();
}

absl::Status ExampleDecoder::Decode(absl::string_view example, ParsedExample* parsed, float* dense,
                                    int64_t* ids, int32_t* label, int64_t num_classes) const {
  if (absl::Status s = parsed->Parse(example); !s.ok()) return s;
  for (size_t i = 0; i < spec_.features.size(); ++i) {
    const FeatureDef& f = spec_.features[i];
    absl::Status s =
        DecodeFeature(i, parsed->Find(f.name), f.is_dense() ? dense + offsets_[i] : nullptr,
                      f.is_dense() ? nullptr : ids + offsets_[i]);
    if (!s.ok()) return s;
  }
  const FeatureView* view = parsed->Find(spec_.label);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("label \"", spec_.label, "\"", what));
  };
  if (view == nullptr) return bad(" is missing");
  int64_t value = 0;
  absl::StatusOr<int64_t> n = 0;
  if (view->kind == ListKind::kInt64) {
    n = ReadInt64s(*view, &value, 1);
  } else if (view->kind == ListKind::kFloat) {
    float v = 0;
    n = ReadFloats(*view, &v, 1);
    if (n.ok() && *n == 1) {
      if (!(std::floor(v) == v && std::abs(v) < 1e9f)) {
        return bad(absl::StrCat(" is ", v, ", not a class number"));
      }
      value = static_cast<int64_t>(v);
    }
  } else {
    return bad(absl::StrCat(" is a ", ListKindName(view->kind),
                            "; it needs an int64_list (or float_list)"));
  }
  if (!n.ok()) return bad(absl::StrCat(": ", n.status().message()));
  if (*n != 1) return bad(absl::StrCat(" has ", *n, " values; it needs one"));
  if (value < 0 || (num_classes > 0 && value >= num_classes) || value > INT32_MAX) {
    return bad(absl::StrCat(" is ", value, ", outside the classes [0, ", num_classes, ")"));
  }
  *label = static_cast<int32_t>(value);
  return absl::OkStatus();
}

}  // namespace pstrain::data
