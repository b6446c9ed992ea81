#include "data/record_survey.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "data/byte_source.h"
#include "data/tfrecord.h"

namespace pstrain::data {
namespace {

// Values of one list, for their count and range.
struct ListValues {
  int64_t count = 0;
  double min = 0, max = 0;
  bool integral = true;
};

template <typename T>
void Range(const std::vector<T>& values, int64_t n, ListValues* out) {
  out->count = n;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(values[i]);
    if (i == 0 || v < out->min) out->min = v;
    if (i == 0 || v > out->max) out->max = v;
    if (std::floor(v) != v) out->integral = false;
  }
}

// Folds one example's feature into its survey.
absl::Status Survey(const FeatureView& view, FeatureSurvey* f, std::vector<float>* floats,
                    std::vector<int64_t>* ints, std::vector<uint8_t>* pixels) {
  const bool first = f->examples == 0;
  if (first) {
    f->kind = view.kind;
    f->all_png = view.kind == ListKind::kBytes;
    f->png_same_shape = f->all_png;
  } else if (f->kind != view.kind && !f->mixed_kinds) {
    f->mixed_kinds = true;
    f->kind = ListKind::kNone;
  }
  ListValues values;
  int64_t single_bytes = -1;  // the one bytes value's length, or -1
  switch (view.kind) {
    case ListKind::kFloat: {
      PSTRAIN_ASSIGN_OR_RETURN(int64_t n, ReadFloats(view, nullptr, 0));
      floats->resize(n);
      PSTRAIN_RETURN_IF_ERROR(ReadFloats(view, floats->data(), n).status());
      Range(*floats, n, &values);
      break;
    }
    case ListKind::kInt64: {
      PSTRAIN_ASSIGN_OR_RETURN(int64_t n, ReadInt64s(view, nullptr, 0));
      ints->resize(n);
      PSTRAIN_RETURN_IF_ERROR(ReadInt64s(view, ints->data(), n).status());
      Range(*ints, n, &values);
      break;
    }
    case ListKind::kBytes: {
      absl::string_view one;
      PSTRAIN_ASSIGN_OR_RETURN(values.count,
                               ReadBytes(view, [&](absl::string_view v) { one = v; }));
      if (values.count != 1) {
        f->all_png = false;
        break;
      }
      single_bytes = static_cast<int64_t>(one.size());
      if (!f->all_png) break;  // decoded only while every value so far was a PNG
      absl::StatusOr<PngShape> png = DecodePng(one, int64_t{1} << 26, pixels);
      if (!png.ok()) {
        f->all_png = false;
      } else if (f->examples == 0) {
        f->png = *png;
      } else if (png->height != f->png.height || png->width != f->png.width ||
                 png->channels != f->png.channels) {
        f->png_same_shape = false;
      }
      break;
    }
    case ListKind::kNone:
      break;
  }
  if (single_bytes < 0) f->all_png = f->png_same_shape = false;
  if (first) {
    f->min_values = f->max_values = values.count;
    f->min_bytes = f->max_bytes = std::max<int64_t>(single_bytes, 0);
  } else {
    f->min_values = std::min(f->min_values, values.count);
    f->max_values = std::max(f->max_values, values.count);
    if (single_bytes >= 0) {
      f->min_bytes = std::min(f->min_bytes, single_bytes);
      f->max_bytes = std::max(f->max_bytes, single_bytes);
    }
  }
  if (values.count > 0 && view.kind != ListKind::kBytes) {
    if (f->values == 0 || values.min < f->min_value) f->min_value = values.min;
    if (f->values == 0 || values.max > f->max_value) f->max_value = values.max;
    f->integral = f->integral && values.integral;
  }
  f->values += values.count;
  ++f->examples;
  return absl::OkStatus();
}

const FeatureSurvey* Find(const RecordSurvey& s, absl::string_view name) {
  for (const FeatureSurvey& f : s.features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// One int64 value in every example: a class, a size or an id.
bool OneInt(const RecordSurvey& s, const FeatureSurvey* f) {
  return f != nullptr && f->kind == ListKind::kInt64 && f->min_values == 1 && f->max_values == 1 &&
         f->examples == s.records;
}

// The same one int64 value in every example (an image's height, say).
int64_t Constant(const RecordSurvey& s, absl::string_view name) {
  const FeatureSurvey* f = Find(s, name);
  return OneInt(s, f) && f->min_value == f->max_value ? static_cast<int64_t>(f->min_value) : 0;
}

}  // namespace

std::vector<int64_t> FirstImageShape(const std::vector<std::string>& files,
                                     const std::string& name) {
  absl::StatusOr<RecordSurvey> survey = SurveyRecords(files, 1);
  if (!survey.ok() || survey->records != 1) return {};
  const FeatureSurvey* image = Find(*survey, name);
  if (image == nullptr || image->kind != ListKind::kBytes || image->values != 1) return {};
  if (image->all_png) return {image->png.height, image->png.width, image->png.channels};
  const int64_t height = Constant(*survey, "height"), width = Constant(*survey, "width");
  const int64_t depth =
      std::max<int64_t>({Constant(*survey, "depth"), Constant(*survey, "channels"), 1});
  if (height > 0 && width > 0 && height * width * depth == image->max_bytes) {
    return {height, width, depth};
  }
  return {};
}

absl::StatusOr<RecordSurvey> SurveyRecords(const std::vector<std::string>& files,
                                           int64_t max_records) {
  RecordSurvey out;
  std::map<std::string, FeatureSurvey, std::less<>> by_name;
  ParsedExample parsed;
  std::string record;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<uint8_t> pixels;
  for (const std::string& path : files) {
    if (out.records >= max_records) break;
    out.files.push_back(path);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordReader> reader,
                             TfRecordReader::Open(path, CompressionForPath(path)));
    for (int64_t n = 0; out.records < max_records; ++n) {
      PSTRAIN_ASSIGN_OR_RETURN(bool more, reader->Next(&record));
      if (!more) break;
      auto where = [&](const absl::Status& s) {
        return absl::InvalidArgumentError(absl::StrCat(path, " record ", n, ": ", s.message()));
      };
      if (absl::Status s = parsed.Parse(record); !s.ok()) return where(s);
      for (const FeatureView& view : parsed.features()) {
        auto [it, added] = by_name.try_emplace(std::string(view.name));
        if (added) it->second.name = std::string(view.name);
        if (absl::Status s = Survey(view, &it->second, &floats, &ints, &pixels); !s.ok()) {
          return where(s);
        }
      }
      ++out.records;
    }
  }
  for (auto& [name, f] : by_name) out.features.push_back(std::move(f));
  return out;
}

std::string SuggestInputBlock(const RecordSurvey& s, const std::string& train_files,
                              const std::string& test_files) {
  // The label: "label", else the first one-int64 feature named like one.
  std::string label;
  for (const char* name : {"label", "labels", "class", "target", "y"}) {
    if (OneInt(s, Find(s, name))) {
      label = name;
      break;
    }
  }
  // A raw image's shape features, left out of the block.
  const int64_t height = Constant(s, "height"), width = Constant(s, "width");
  const int64_t depth = std::max(Constant(s, "depth"), Constant(s, "channels"));
  std::string out = "input {\n  format: tfrecord\n";
  absl::StrAppend(&out, "  train_files: \"", train_files, "\"\n");
  absl::StrAppend(&out, "  test_files: \"", test_files, "\"", test_files.empty() ? "  # give" : "",
                  "\n");
  std::string shape_lines;
  for (const FeatureSurvey& f : s.features) {
    if (f.name == label) continue;
    const bool everywhere = f.examples == s.records;
    const bool fixed = f.min_values == f.max_values && everywhere;
    const std::string count =
        fixed ? absl::StrCat("length: ", f.max_values) : absl::StrCat("max_len: ", f.max_values);
    const std::string missing =
        everywhere ? "" : absl::StrFormat("  # in %d of %d examples", f.examples, s.records);
    std::string line;
    if (f.mixed_kinds) {
      line = absl::StrCat("  # \"", f.name, "\" has different list kinds in different examples\n");
    } else if (f.kind == ListKind::kFloat) {
      line = absl::StrCat("  feature { name: \"", f.name, "\" ", count, " }", missing, "\n");
    } else if (f.kind == ListKind::kInt64) {
      if ((f.name == "height" && height > 0) || (f.name == "width" && width > 0) ||
          ((f.name == "depth" || f.name == "channels") && depth > 0)) {
        absl::StrAppend(&shape_lines, "  # \"", f.name, "\" is ", static_cast<int64_t>(f.min_value),
                        " in every example: left out\n");
        continue;
      }
      const std::string ids =
          f.min_value >= 0 ? absl::StrCat("vocabulary: ", static_cast<int64_t>(f.max_value) + 1)
                           : std::string("hash_buckets: 100000  # negative values: hashed");
      line = absl::StrCat("  feature { name: \"", f.name, "\" type: \"int64\" ", count, " ", ids,
                          " }", missing, "\n");
    } else if (f.kind == ListKind::kBytes && f.all_png && f.png_same_shape && fixed) {
      line = absl::StrFormat(
          "  feature { name: \"%s\" decode: \"png\" length: %d scale: 0.00392156862745098 }  "
          "# %dx%dx%d PNG\n",
          f.name, f.png.values(), f.png.height, f.png.width, f.png.channels);
    } else if (f.kind == ListKind::kBytes && fixed && f.max_values == 1 &&
               f.min_bytes == f.max_bytes && f.max_bytes >= 16) {
      const int64_t shape = height * width * std::max<int64_t>(depth, 1);
      const bool shaped = height > 0 && width > 0 && shape == f.max_bytes;
      line = absl::StrFormat(
          "  feature { name: \"%s\" decode: \"raw_uint8\" length: %d scale: "
          "0.00392156862745098 }  # %s\n",
          f.name, f.max_bytes,
          shaped ? absl::StrFormat("%dx%dx%d bytes", height, width, std::max<int64_t>(depth, 1))
                 : "check: one bytes value of this length in every example");
    } else if (f.kind == ListKind::kBytes) {
      line = absl::StrCat("  feature { name: \"", f.name, "\" type: \"string\" ", count,
                          " hash_buckets: 10000 }  # or a vocabulary_file", missing, "\n");
    } else {
      continue;
    }
    out += line;
  }
  out += shape_lines;
  absl::StrAppend(&out, label.empty() ? "  label: \"label\"  # no int64 label found: name yours\n"
                                      : absl::StrCat("  label: \"", label, "\"\n"));
  out += "}\n";
  return out;
}

}  // namespace pstrain::data
