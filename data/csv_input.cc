#include "data/csv_input.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/tokenize.h"

namespace pstrain::data {
namespace {

// A cell as an error shows it: quoted, cut at 40 bytes.
std::string Shown(absl::string_view cell) {
  return cell.size() <= 40 ? absl::StrCat("\"", cell, "\"")
                           : absl::StrCat("\"", cell.substr(0, 40), "...\"");
}

// A cell as a float: integers of up to 9 digits directly (the common
// case, exact as floats to 2^24 and rounded once beyond), anything else
// through SimpleAtof. False when it is no number.
bool ParseFloat(absl::string_view cell, float* out) {
  size_t i = cell[0] == '-' || cell[0] == '+' ? 1 : 0;
  if (cell.size() > i && cell.size() - i <= 9) {
    int32_t v = 0;
    size_t k = i;
    for (; k < cell.size() && cell[k] >= '0' && cell[k] <= '9'; ++k) v = v * 10 + (cell[k] - '0');
    if (k == cell.size()) {
      *out = cell[0] == '-' ? -static_cast<float>(v) : static_cast<float>(v);
      return true;
    }
  }
  return absl::SimpleAtof(cell, out);
}

class CsvRecordDecoder : public RecordDecoder {
 public:
  CsvRecordDecoder(std::shared_ptr<const CsvFormat> format, int64_t num_classes)
      : format_(std::move(format)), num_classes_(num_classes) {}
  absl::Status Decode(absl::string_view record, float* dense, int64_t* ids,
                      int32_t* label) override {
    if (absl::Status s = row_.Parse(record, format_->dialect()); !s.ok()) return s;
    return format_->Decode(row_, dense, ids, label, num_classes_);
  }

 private:
  const std::shared_ptr<const CsvFormat> format_;
  const int64_t num_classes_;
  CsvRow row_;
};

// The header row of `path` as column names.
absl::StatusOr<std::vector<std::string>> ReadHeader(CsvReader* reader, const CsvDialect& dialect) {
  std::string text;
  absl::StatusOr<bool> got = reader->Next(&text);
  if (!got.ok()) return got.status();
  if (!*got) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader->path(), " is empty: it has no header row naming the columns"));
  }
  CsvRow row;
  if (absl::Status s = row.Parse(text, dialect); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(reader->Where(1), ": ", s.message()));
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < row.size(); ++i) names.emplace_back(row.field(i));
  return names;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CsvFormat>> CsvFormat::Create(
    const CsvOptions& options, std::shared_ptr<const ExampleDecoder> decoder,
    const std::string& first_file, Compression compression) {
  std::shared_ptr<CsvFormat> format(new CsvFormat(options, std::move(decoder)));
  format->first_file_ = first_file;
  if (!options.columns.empty()) {
    format->columns_ = options.columns;
  } else if (!options.header) {
    return absl::InvalidArgumentError(
        "the CSV input has no header row (header: false) and names no columns: give column "
        "names");
  } else {
    absl::StatusOr<std::unique_ptr<CsvReader>> reader =
        CsvReader::Open(first_file, compression, options.dialect);
    if (!reader.ok()) return reader.status();
    absl::StatusOr<std::vector<std::string>> names = ReadHeader(reader->get(), options.dialect);
    if (!names.ok()) return names.status();
    format->columns_ = std::move(*names);
    format->columns_from_header_ = true;
  }
  const std::string source =
      format->columns_from_header_ ? absl::StrCat("the header of ", first_file) : "the columns";
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < format->columns_.size(); ++i) {
    if (!index.emplace(format->columns_[i], i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("column \"", format->columns_[i], "\" is named twice in ", source));
    }
  }
  const FeatureSpec& spec = format->decoder_->spec();
  for (const FeatureDef& f : spec.features) {
    const std::string& column = f.column.empty() ? f.name : f.column;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("feature \"", f.name, "\": ", what));
    };
    auto it = index.find(column);
    if (it == index.end()) {
      return bad(absl::StrCat("no column is named \"", column, "\" in ", source));
    }
    if (f.max_len > 0 && f.type != FeatureType::kString) {
      return bad(
          "max_len is for a string column of text (split into words); a CSV cell holds one "
          "number, so give length: N to read N columns");
    }
    const int64_t reads = f.max_len > 0 ? 1 : f.length;
    if (static_cast<int64_t>(it->second) + reads > static_cast<int64_t>(format->columns_.size())) {
      return bad(absl::StrCat("length ", f.length, " from column \"", column,
                              "\" runs past the last of the ", format->columns_.size(),
                              " columns"));
    }
    format->first_column_.push_back(it->second);
  }
  auto label = index.find(spec.label);
  if (label == index.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label \"", spec.label, "\": no column is named so in ", source));
  }
  format->label_column_ = label->second;
  return std::shared_ptr<const CsvFormat>(std::move(format));
}

absl::StatusOr<std::unique_ptr<RecordReader>> CsvFormat::OpenFile(const std::string& path,
                                                                  Compression compression) const {
  absl::StatusOr<std::unique_ptr<CsvReader>> reader =
      CsvReader::Open(path, compression, options_.dialect);
  if (!reader.ok()) return reader.status();
  if (options_.header) {
    absl::StatusOr<std::vector<std::string>> names = ReadHeader(reader->get(), options_.dialect);
    if (!names.ok()) return names.status();
    if (columns_from_header_ && *names != columns_) {
      return absl::InvalidArgumentError(
          absl::StrCat((*reader)->Where(1), ": the header (", absl::StrJoin(*names, ", "),
                       ") is not that of ", first_file_, " (", absl::StrJoin(columns_, ", "), ")"));
    }
  }
  return std::unique_ptr<RecordReader>(std::move(*reader));
}

std::unique_ptr<RecordDecoder> CsvFormat::NewDecoder(int64_t num_classes) const {
  // The decoder shares ownership of the format it reads through.
  return std::make_unique<CsvRecordDecoder>(shared_from_this(), num_classes);
}

absl::Status CsvFormat::CheckWidth(const CsvRow& row) const {
  if (row.size() == columns_.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(row.size(), " fields where there are ", columns_.size(), " columns"));
}

absl::StatusOr<float> CsvFormat::FloatAt(const CsvRow& row, size_t column,
                                         const FeatureDef& f) const {
  const absl::string_view cell = row.field(column);
  if (cell.empty()) {
    if (f.has_default) return f.default_value;
    return absl::InvalidArgumentError(absl::StrCat("column \"", columns_[column],
                                                   "\" is empty and feature \"", f.name,
                                                   "\" has no default_value"));
  }
  float v = 0;
  if (!ParseFloat(cell, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("column \"", columns_[column], "\" is ",
                                                   Shown(cell), ", not a finite number"));
  }
  return v;
}

absl::StatusOr<int64_t> CsvFormat::IntAt(const CsvRow& row, size_t column,
                                         const FeatureDef& f) const {
  const absl::string_view cell = row.field(column);
  if (cell.empty()) {
    if (f.has_default) return static_cast<int64_t>(f.default_value);
    return absl::InvalidArgumentError(absl::StrCat("column \"", columns_[column],
                                                   "\" is empty and feature \"", f.name,
                                                   "\" has no default_value"));
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(cell, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("column \"", columns_[column], "\" is ", Shown(cell), ", not an integer"));
  }
  return v;
}

absl::Status CsvFormat::IdAt(const CsvRow& row, size_t column, size_t feature, int64_t* value,
                             int64_t* id) const {
  absl::StatusOr<int64_t> v = IntAt(row, column, decoder_->spec().features[feature]);
  if (!v.ok()) return v.status();
  absl::StatusOr<int64_t> mapped = decoder_->IdOfValue(feature, *v);
  if (!mapped.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("column \"", columns_[column], "\": ", mapped.status().message()));
  }
  *value = *v;
  *id = *mapped;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CsvFormat::LabelAt(const CsvRow& row, int64_t num_classes) const {
  const absl::string_view cell = row.field(label_column_);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("label column \"", columns_[label_column_], "\" ", what));
  };
  int64_t value = 0;
  if (!absl::SimpleAtoi(cell, &value)) {
    double v = 0;
    if (!absl::SimpleAtod(cell, &v) || !(std::floor(v) == v && std::abs(v) < 1e9)) {
      return bad(cell.empty() ? "is empty"
                              : absl::StrCat("is ", Shown(cell), ", not a class number"));
    }
    value = static_cast<int64_t>(v);
  }
  if (value < 0 || (num_classes > 0 && value >= num_classes) || value > INT32_MAX) {
    return bad(absl::StrCat("is ", value, ", outside the classes [0, ", num_classes, ")"));
  }
  return value;
}

absl::Status CsvFormat::Decode(const CsvRow& row, float* dense, int64_t* ids, int32_t* label,
                               int64_t num_classes) const {
  if (absl::Status s = CheckWidth(row); !s.ok()) return s;
  const FeatureSpec& spec = decoder_->spec();
  std::string word;
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureDef& f = spec.features[i];
    const size_t c = first_column_[i];
    const int64_t at = decoder_->OffsetOf(i);
    switch (f.type) {
      case FeatureType::kFloat:
        for (int64_t k = 0; k < f.length; ++k) {
          absl::StatusOr<float> v = FloatAt(row, c + k, f);
          if (!v.ok()) return v.status();
          dense[at + k] = *v * f.scale;
        }
        break;
      case FeatureType::kInt64:
        for (int64_t k = 0; k < f.length; ++k) {
          int64_t value = 0;
          if (absl::Status s = IdAt(row, c + k, i, &value, &ids[at + k]); !s.ok()) return s;
        }
        break;
      case FeatureType::kString:
        if (f.max_len == 0) {
          for (int64_t k = 0; k < f.length; ++k) ids[at + k] = decoder_->IdOf(i, row.field(c + k));
          break;
        }
        int64_t n = 0;
        ForEachWord(row.field(c), &word, [&](absl::string_view w) {
          if (n < f.max_len || f.truncate_front) {
            PutSequenceId(f, n, decoder_->IdOf(i, w), ids + at);
          }
          ++n;
        });
        FinishSequence(f, n, ids + at);
        break;
    }
  }
  absl::StatusOr<int64_t> value = LabelAt(row, num_classes);
  if (!value.ok()) return value.status();
  *label = static_cast<int32_t>(*value);
  return absl::OkStatus();
}

absl::Status CsvFormat::Values(const CsvRow& row, std::vector<CsvFeatureValues>* features,
                               int64_t* label) const {
  if (absl::Status s = CheckWidth(row); !s.ok()) return s;
  const FeatureSpec& spec = decoder_->spec();
  features->resize(spec.features.size());
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureDef& f = spec.features[i];
    const size_t c = first_column_[i];
    CsvFeatureValues& out = (*features)[i];
    out.floats.clear();
    out.ints.clear();
    out.strings.clear();
    switch (f.type) {
      case FeatureType::kFloat:
        for (int64_t k = 0; k < f.length; ++k) {
          absl::StatusOr<float> v = FloatAt(row, c + k, f);
          if (!v.ok()) return v.status();
          out.floats.push_back(*v);
        }
        break;
      case FeatureType::kInt64:
        for (int64_t k = 0; k < f.length; ++k) {
          // The id is checked as Decode checks it, so what converts also trains.
          int64_t value = 0, id = 0;
          if (absl::Status s = IdAt(row, c + k, i, &value, &id); !s.ok()) return s;
          out.ints.push_back(value);
        }
        break;
      case FeatureType::kString:
        if (f.max_len == 0) {
          for (int64_t k = 0; k < f.length; ++k) out.strings.emplace_back(row.field(c + k));
        } else {
          out.strings = Words(row.field(c));
        }
        break;
    }
  }
  absl::StatusOr<int64_t> value = LabelAt(row, 0);
  if (!value.ok()) return value.status();
  *label = *value;
  return absl::OkStatus();
}

}  // namespace pstrain::data
