#include "data/tfds.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/json.h"

namespace pstrain::data {
namespace {

namespace fs = std::filesystem;

absl::Status Bad(const std::string& file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
}

// TFDS writes 64-bit integers as strings (protobuf's JSON form); older
// versions as numbers.
std::optional<int64_t> IntOf(const Json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  int64_t v = 0;
  if (j.is_string() && absl::SimpleAtoi(j.get<std::string>(), &v)) return v;
  return std::nullopt;
}

std::string StringOf(const Json* j) {
  return j != nullptr && j->is_string() ? j->get<std::string>() : std::string();
}

// The last dotted part of a Python class name.
std::string ShortClass(const std::string& python_class) {
  const size_t dot = python_class.rfind('.');
  return dot == std::string::npos ? python_class : python_class.substr(dot + 1);
}

absl::StatusOr<std::vector<int64_t>> ShapeOf(const Json* shape, const std::string& file,
                                             const std::string& feature) {
  std::vector<int64_t> out;
  if (shape == nullptr) return out;
  // TFDS 4: {"dimensions": ["-1", "-1", "3"]}; older: [null, null, 3].
  const Json* dims = shape->is_object() ? FindMember(*shape, "dimensions") : shape;
  if (dims == nullptr) return out;  // a scalar
  if (!dims->is_array()) return Bad(file, absl::StrCat("feature \"", feature, "\": bad shape"));
  for (const Json& d : *dims) {
    if (d.is_null()) {
      out.push_back(-1);
      continue;
    }
    std::optional<int64_t> v = IntOf(d);
    if (!v) return Bad(file, absl::StrCat("feature \"", feature, "\": bad shape"));
    out.push_back(*v);
  }
  return out;
}

// Appends the features of one FeaturesDict's members (`members`, an
// object), nested dicts flattened with "/" as TFDS flattens them into
// an Example.
absl::Status ReadFeatures(const Json& members, const std::string& prefix, const std::string& file,
                          std::vector<TfdsFeature>* out) {
  if (!members.is_object()) return Bad(file, "the features are not an object");
  for (const auto& [key, value] : members.items()) {
    const std::string name = prefix.empty() ? key : absl::StrCat(prefix, "/", key);
    if (!value.is_object())
      return Bad(file, absl::StrCat("feature \"", name, "\" is not an object"));
    // TFDS 4: {"pythonClassName": ..., "<kind>": {...}}; older: {"type":
    // ..., "content": {...}}.
    const std::string python_class = FindMember(value, "pythonClassName") != nullptr
                                         ? StringOf(FindMember(value, "pythonClassName"))
                                         : StringOf(FindMember(value, "type"));
    TfdsFeature f;
    f.name = name;
    f.kind = ShortClass(python_class);
    if (f.kind.empty()) {
      return Bad(file, absl::StrCat("feature \"", name, "\" names no class (pythonClassName)"));
    }
    const Json* content = FindMember(value, "content");
    if (f.kind == "FeaturesDict") {
      const Json* dict = FindMember(value, "featuresDict");
      const Json* nested = dict != nullptr ? FindMember(*dict, "features") : content;
      if (nested == nullptr) return Bad(file, absl::StrCat("feature \"", name, "\": no features"));
      if (absl::Status s = ReadFeatures(*nested, name, file, out); !s.ok()) return s;
      continue;
    }
    // The kind's own member: "image", "classLabel", "tensor", "text"...
    std::string own = f.kind;
    own[0] = absl::ascii_tolower(own[0]);
    const Json* body = FindMember(value, own);
    if (body == nullptr) body = content;
    if (body != nullptr && body->is_object()) {
      auto shape = ShapeOf(FindMember(*body, "shape"), file, name);
      if (!shape.ok()) return shape.status();
      f.shape = *std::move(shape);
      f.dtype = StringOf(FindMember(*body, "dtype"));
      f.encoding = StringOf(FindMember(*body, "encodingFormat"));
      if (f.encoding.empty()) f.encoding = StringOf(FindMember(*body, "encoding_format"));
      const Json* classes = FindMember(*body, "numClasses");
      if (classes == nullptr) classes = FindMember(*body, "num_classes");
      if (classes != nullptr) {
        std::optional<int64_t> n = IntOf(*classes);
        if (!n || *n < 1) {
          return Bad(file, absl::StrCat("feature \"", name, "\": numClasses is not a count"));
        }
        f.num_classes = *n;
      }
    }
    out->push_back(std::move(f));
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat(path,
                                              " is missing: not a TensorFlow Datasets "
                                              "version directory"));
    }
    return text.status();
  }
  absl::StatusOr<Json> json = ParseJson(*text);
  if (!json.ok()) return Bad(path, json.status().message());
  return json;
}

absl::Status ReadInfo(const std::string& path, TfdsDataset* ds) {
  absl::StatusOr<Json> info = ReadJsonFile(path);
  if (!info.ok()) return info.status();
  ds->name = StringOf(FindMember(*info, "name"));
  ds->version = StringOf(FindMember(*info, "version"));
  if (ds->name.empty()) return Bad(path, "no \"name\"");
  const std::string format = StringOf(FindMember(*info, "fileFormat"));
  if (!format.empty() && format != "tfrecord") {
    return Bad(path, absl::StrCat("its records are ", format, "; pstrain reads tfrecord files"));
  }
  const Json* splits = FindMember(*info, "splits");
  if (splits == nullptr || !splits->is_array() || splits->empty()) {
    return Bad(path, "no \"splits\"");
  }
  for (const Json& s : *splits) {
    TfdsSplit split;
    split.name = StringOf(FindMember(s, "name"));
    const Json* lengths = FindMember(s, "shardLengths");
    if (split.name.empty() || lengths == nullptr || !lengths->is_array()) {
      return Bad(path, "a split without \"name\" or \"shardLengths\"");
    }
    for (const Json& n : *lengths) {
      std::optional<int64_t> v = IntOf(n);
      if (!v || *v < 0) return Bad(path, absl::StrCat("split ", split.name, ": bad shardLengths"));
      split.shard_lengths.push_back(*v);
    }
    ds->splits.push_back(std::move(split));
  }
  // {"input": "image", "output": "label"}, or TFDS 4.9's
  // {"tuple": {"items": [{"featureKey": "image"}, {"featureKey": "label"}]}}.
  if (const Json* keys = FindMember(*info, "supervisedKeys"); keys != nullptr) {
    ds->supervised_input = StringOf(FindMember(*keys, "input"));
    ds->supervised_label = StringOf(FindMember(*keys, "output"));
    const Json* tuple = FindMember(*keys, "tuple");
    const Json* items = tuple != nullptr ? FindMember(*tuple, "items") : nullptr;
    if (items != nullptr && items->is_array() && items->size() == 2) {
      ds->supervised_input = StringOf(FindMember((*items)[0], "featureKey"));
      ds->supervised_label = StringOf(FindMember((*items)[1], "featureKey"));
    }
  }
  return absl::OkStatus();
}

// Each split's shards: NAME-SPLIT.tfrecord-IIIII-of-NNNNN, as many as its
// shardLengths.
absl::Status FindShards(TfdsDataset* ds) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(ds->dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat(ds->dir, ": ", ec.message()));
  std::sort(names.begin(), names.end());
  for (TfdsSplit& split : ds->splits) {
    const std::string prefix = absl::StrCat(ds->name, "-", split.name, ".tfrecord-");
    for (const std::string& n : names) {
      if (absl::StartsWith(n, prefix) && absl::StrContains(n, "-of-")) {
        split.files.push_back(absl::StrCat(ds->dir, "/", n));
      }
    }
    if (split.files.size() != split.shard_lengths.size()) {
      return absl::NotFoundError(
          absl::StrCat(ds->dir, ": split ", split.name, " has ", split.shard_lengths.size(),
                       " shards in dataset_info.json but ", split.files.size(), " files named ",
                       prefix, "*-of-*"));
    }
  }
  return absl::OkStatus();
}

// A ClassLabel's names, one per line of NAME.labels.txt, when TFDS wrote
// them.
void ReadClassNames(const std::string& dir, TfdsFeature* f) {
  absl::StatusOr<std::string> text = ReadFile(absl::StrCat(dir, "/", f->name, ".labels.txt"));
  if (!text.ok()) return;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    f->class_names.emplace_back(absl::StripTrailingAsciiWhitespace(line));
  }
}

// One bound of a slice: "80%", "-10", "" (none).
struct Bound {
  bool given = false;
  bool percent = false;
  int64_t value = 0;
};

bool ParseBound(absl::string_view text, Bound* b) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return true;
  b->given = true;
  b->percent = absl::ConsumeSuffix(&text, "%");
  return absl::SimpleAtoi(text, &b->value);
}

// TFDS's "closest" rounding: Python's round(), ties to even.
int64_t PercentToRecords(int64_t percent, int64_t examples) {
  return static_cast<int64_t>(
      std::nearbyint(static_cast<double>(percent) * static_cast<double>(examples) / 100.0));
}

}  // namespace

int64_t TfdsSplit::examples() const {
  int64_t n = 0;
  for (int64_t l : shard_lengths) n += l;
  return n;
}

const TfdsSplit* TfdsDataset::FindSplit(absl::string_view name) const {
  for (const TfdsSplit& s : splits) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const TfdsFeature* TfdsDataset::FindFeature(absl::string_view name) const {
  for (const TfdsFeature& f : features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const TfdsFeature* TfdsDataset::OnlyOfKind(absl::string_view kind) const {
  const TfdsFeature* found = nullptr;
  for (const TfdsFeature& f : features) {
    if (f.kind != kind) continue;
    if (found != nullptr) return nullptr;
    found = &f;
  }
  return found;
}

const TfdsFeature* TfdsDataset::ImageFeature() const {
  return supervised_input.empty() ? OnlyOfKind("Image") : FindFeature(supervised_input);
}

const TfdsFeature* TfdsDataset::LabelFeature() const {
  return supervised_label.empty() ? OnlyOfKind("ClassLabel") : FindFeature(supervised_label);
}

bool IsTfdsDirectory(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && fs::is_regular_file(fs::path(dir) / "dataset_info.json", ec);
}

absl::StatusOr<TfdsDataset> ReadTfdsDirectory(const std::string& dir) {
  TfdsDataset ds;
  ds.dir = dir;
  while (ds.dir.size() > 1 && ds.dir.back() == '/') ds.dir.pop_back();
  if (absl::Status s = ReadInfo(ds.dir + "/dataset_info.json", &ds); !s.ok()) return s;
  const std::string features_path = ds.dir + "/features.json";
  absl::StatusOr<Json> features = ReadJsonFile(features_path);
  if (!features.ok()) return features.status();
  const Json* dict = FindMember(*features, "featuresDict");
  const Json* members =
      dict != nullptr ? FindMember(*dict, "features") : FindMember(*features, "content");
  if (members == nullptr) return Bad(features_path, "no FeaturesDict (featuresDict.features)");
  if (absl::Status s = ReadFeatures(*members, "", features_path, &ds.features); !s.ok()) return s;
  for (TfdsFeature& f : ds.features) {
    if (f.kind == "ClassLabel") ReadClassNames(ds.dir, &f);
  }
  if (absl::Status s = FindShards(&ds); !s.ok()) return s;
  return ds;
}

absl::StatusOr<std::vector<RecordRange>> ResolveSplit(const TfdsDataset& dataset,
                                                      absl::string_view spec) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("split \"", spec, "\": ", what));
  };
  std::vector<RecordRange> out;
  for (absl::string_view part : absl::StrSplit(spec, '+')) {
    part = absl::StripAsciiWhitespace(part);
    absl::string_view name = part;
    Bound from, to;
    if (const size_t open = part.find('['); open != absl::string_view::npos) {
      name = absl::StripAsciiWhitespace(part.substr(0, open));
      absl::string_view slice = part.substr(open + 1);
      if (!absl::ConsumeSuffix(&slice, "]")) {
        return bad("a slice is [FROM:TO], each bound a count or a percent (train[:80%])");
      }
      const size_t colon = slice.find(':');
      if (colon == absl::string_view::npos || !ParseBound(slice.substr(0, colon), &from) ||
          !ParseBound(slice.substr(colon + 1), &to)) {
        return bad("a slice is [FROM:TO], each bound a count or a percent (train[:80%])");
      }
    }
    const TfdsSplit* split = dataset.FindSplit(name);
    if (split == nullptr) {
      std::vector<std::string> names;
      for (const TfdsSplit& s : dataset.splits) names.push_back(s.name);
      return bad(absl::StrCat("no split \"", name, "\" in ", dataset.name, " (it has ",
                              absl::StrJoin(names, ", "), ")"));
    }
    const int64_t n = split->examples();
    for (const Bound* b : {&from, &to}) {
      if (b->percent && std::abs(b->value) > 100) return bad("a percent is in -100..100");
    }
    int64_t lo = !from.given ? 0 : from.percent ? PercentToRecords(from.value, n) : from.value;
    int64_t hi = !to.given ? n : to.percent ? PercentToRecords(to.value, n) : to.value;
    if (std::abs(lo) > n || std::abs(hi) > n) {
      return bad(
          absl::StrCat("the slice [", lo, ":", hi, "] is outside ", name, "'s ", n, " records"));
    }
    if (lo < 0) lo += n;
    if (hi < 0) hi += n;
    int64_t offset = 0;
    for (size_t s = 0; s < split->files.size(); ++s) {
      const int64_t len = split->shard_lengths[s];
      const int64_t begin = std::max<int64_t>(lo - offset, 0);
      const int64_t end = std::min<int64_t>(hi - offset, len);
      if (begin < end) {
        RecordRange r;
        r.path = split->files[s];
        if (begin != 0 || end != len) {
          r.begin = begin;
          r.end = end;
        }
        out.push_back(std::move(r));
      }
      offset += len;
    }
  }
  if (out.empty()) return bad("selects no records");
  return out;
}

}  // namespace pstrain::data
