// The tf.train.Example reader (data/example_parser.h) and the feature-spec
// decoder (data/feature_spec.h) on arbitrary bytes. Whatever protobuf's own
// parser reads, ours reads the same: every feature with its kind and its
// values, bit for bit; or it refuses it with the one documented error (a
// map value in pieces). The decoder never writes outside
// its layout and, when it succeeds, gives a label in range.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/example_parser.h"
#include "data/feature_spec.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/example.pb.h"

namespace {

using pstrain::data::ListKind;

ListKind KindOf(const pstrain::v1::Feature& f) {
  switch (f.kind_case()) {
    case pstrain::v1::Feature::kBytesList:
      return ListKind::kBytes;
    case pstrain::v1::Feature::kFloatList:
      return ListKind::kFloat;
    case pstrain::v1::Feature::kInt64List:
      return ListKind::kInt64;
    default:
      return ListKind::kNone;
  }
}

const pstrain::data::ExampleDecoder& Decoder() {
  static const auto* decoder = [] {
    pstrain::data::FeatureSpec spec;
    pstrain::data::FeatureDef x;
    x.name = "x";
    x.length = 3;
    x.has_default = true;
    pstrain::data::FeatureDef v;
    v.name = "v";
    v.max_len = 4;
    pstrain::data::FeatureDef ids;
    ids.name = "ids";
    ids.type = pstrain::data::FeatureType::kInt64;
    ids.max_len = 5;
    ids.vocabulary = 1000;
    pstrain::data::FeatureDef s;
    s.name = "s";
    s.type = pstrain::data::FeatureType::kString;
    s.max_len = 3;
    s.hash_buckets = 97;
    // Floats stored as bytes: raw and PNG, of any length up to their width.
    pstrain::data::FeatureDef raw;
    raw.name = "raw";
    raw.max_len = 4;
    raw.decode = pstrain::data::FeatureDecode::kRawUint8;
    pstrain::data::FeatureDef f32;
    f32.name = "f32";
    f32.max_len = 2;
    f32.decode = pstrain::data::FeatureDecode::kRawFloat32;
    pstrain::data::FeatureDef png;
    png.name = "png";
    png.max_len = 16;
    png.decode = pstrain::data::FeatureDecode::kPng;
    spec.features = {x, v, ids, s, raw, f32, png};
    return pstrain::data::ExampleDecoder::Create(spec)->release();
  }();
  return *decoder;
}

}  // namespace

// Protobuf logs every invalid UTF-8 map key it parses; the fuzzer makes
// many, and the log would cost more than the run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  pstrain::data::ParsedExample parsed;
  const absl::Status ours = parsed.Parse(bytes);
  pstrain::v1::Example theirs;
  if (theirs.ParseFromString(bytes)) {
    if (!ours.ok()) {
      const std::string m(ours.message());
      if (m.find("given in pieces") == std::string::npos) __builtin_trap();
    } else {
      const auto& map = theirs.features().feature();
      for (const auto& [name, feature] : map) {
        const pstrain::data::FeatureView* view = parsed.Find(name);
        if (view == nullptr || view->kind != KindOf(feature)) __builtin_trap();
        if (view->kind == ListKind::kFloat) {
          const auto& want = feature.float_list().value();
          std::vector<float> got(want.size() + 1);
          auto n = pstrain::data::ReadFloats(*view, got.data(), static_cast<int64_t>(got.size()));
          if (!n.ok() || *n != want.size() ||
              (*n > 0 && std::memcmp(got.data(), want.data(), *n * sizeof(float)) != 0)) {
            __builtin_trap();
          }
        } else if (view->kind == ListKind::kInt64) {
          const auto& want = feature.int64_list().value();
          std::vector<int64_t> got(want.size() + 1);
          auto n = pstrain::data::ReadInt64s(*view, got.data(), static_cast<int64_t>(got.size()));
          if (!n.ok() || *n != want.size()) __builtin_trap();
          for (int i = 0; i < want.size(); ++i) {
            if (got[i] != want[i]) __builtin_trap();
          }
        } else if (view->kind == ListKind::kBytes) {
          const auto& want = feature.bytes_list().value();
          int i = 0;
          bool same = true;
          auto n = pstrain::data::ReadBytes(*view, [&](absl::string_view s) {
            same = same && i < want.size() && s == want[i];
            ++i;
          });
          if (!n.ok() || *n != want.size() || !same) __builtin_trap();
        }
      }
      // No feature protobuf does not see.
      for (const auto& f : parsed.features()) {
        if (map.find(std::string(f.name)) == map.end()) __builtin_trap();
      }
    }
  }
  // The decoder: guard values around the layout stay untouched.
  const auto& d = Decoder();
  std::vector<float> dense(d.dense_width() + 2, -1.0f);
  std::vector<int64_t> ids(d.ids_width() + 2, -1);
  int32_t label = -1;
  const absl::Status s =
      d.Decode(bytes, &parsed, dense.data() + 1, ids.data() + 1, &label, /*num_classes=*/10);
  if (dense.front() != -1.0f || dense.back() != -1.0f || ids.front() != -1 || ids.back() != -1) {
    __builtin_trap();
  }
  if (s.ok() && (label < 0 || label >= 10)) __builtin_trap();
  if (s.ok()) {
    for (int64_t k = 1; k <= d.ids_width(); ++k) {
      if (ids[k] < 0 || ids[k] >= 1000) __builtin_trap();
    }
  }
  return 0;
}
