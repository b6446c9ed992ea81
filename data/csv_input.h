// CSV and TSV files as a job's examples, decoded through the feature spec
// into the common layout (data/feature_spec.h), as TensorFlow's
// make_csv_dataset reads them with feature columns on top.
//
// The columns are named by the files' header row or by a list in the
// config. Each feature reads the column of its `column` (default: its
// name); a fixed-length feature of length N reads N columns from there on
// (784 pixel columns as one "image"). By type:
//   float   each column a number (times scale); an empty one takes
//           default_value
//   int64   each column an integer id (vocabulary range or hash_buckets);
//           an empty one takes default_value
//   string  each column a token mapped to an id (empty: id 0); with
//           max_len, one column of text split into words (data/tokenize.h),
//           the first max_len kept and the rest padded with 0
// The label column holds a class number. Columns no feature reads are
// ignored. A row is one example; its errors name the file and line.
// A CsvFormat is immutable and thread-safe.
#ifndef PSTRAIN_DATA_CSV_INPUT_H_
#define PSTRAIN_DATA_CSV_INPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/csv.h"
#include "data/feature_spec.h"
#include "data/record_format.h"

namespace pstrain::data {

struct CsvOptions {
  CsvDialect dialect;
  // The first row of every file names the columns (and is no example).
  bool header = true;
  // The columns' names; when empty, the first file's header gives them
  // and every other file's header must be the same.
  std::vector<std::string> columns;
};

// One feature's values in a row before ids are taken and floats scaled:
// what a tf.train.Example of the row holds (the CSV-to-TFRecord converter).
struct CsvFeatureValues {
  std::vector<float> floats;         // float
  std::vector<int64_t> ints;         // int64
  std::vector<std::string> strings;  // string: cells, or a text's words
};

class CsvFormat : public RecordFormat, public std::enable_shared_from_this<CsvFormat> {
 public:
  // Resolves every feature's columns against `options.columns` or the
  // header of `first_file`. InvalidArgument naming the feature or the
  // label: a column no column is named, a length that runs past the last
  // column, max_len on a float or int64 feature (a CSV cell holds one
  // number), a column name given twice, no header and no columns.
  static absl::StatusOr<std::shared_ptr<const CsvFormat>> Create(
      const CsvOptions& options, std::shared_ptr<const ExampleDecoder> decoder,
      const std::string& first_file, Compression compression);

  int64_t dense_width() const override { return decoder_->dense_width(); }
  int64_t ids_width() const override { return decoder_->ids_width(); }
  // Past the header, which must match the first file's when it names the
  // columns (InvalidArgument "PATH line 1: ...").
  absl::StatusOr<std::unique_ptr<RecordReader>> OpenFile(const std::string& path,
                                                         Compression compression) const override;
  std::unique_ptr<RecordDecoder> NewDecoder(int64_t num_classes) const override;

  const std::vector<std::string>& columns() const { return columns_; }
  const FeatureSpec& spec() const { return decoder_->spec(); }
  const CsvDialect& dialect() const { return options_.dialect; }

  // A row into the layout. InvalidArgument naming the column: a wrong
  // number of fields, a cell that is not a number or integer, an empty one
  // without a default, an id outside its vocabulary, a bad label.
  absl::Status Decode(const CsvRow& row, float* dense, int64_t* ids, int32_t* label,
                      int64_t num_classes) const;
  // A row's values per feature (spec order) and its label, Decode's errors.
  absl::Status Values(const CsvRow& row, std::vector<CsvFeatureValues>* features,
                      int64_t* label) const;

 private:
  CsvFormat(const CsvOptions& options, std::shared_ptr<const ExampleDecoder> decoder)
      : options_(options), decoder_(std::move(decoder)) {}
  absl::Status CheckWidth(const CsvRow& row) const;
  absl::StatusOr<float> FloatAt(const CsvRow& row, size_t column, const FeatureDef& f) const;
  absl::StatusOr<int64_t> IntAt(const CsvRow& row, size_t column, const FeatureDef& f) const;
  // Int64 feature `feature`'s cell at `column`: its value and its id.
  absl::Status IdAt(const CsvRow& row, size_t column, size_t feature, int64_t* value,
                    int64_t* id) const;
  absl::StatusOr<int64_t> LabelAt(const CsvRow& row, int64_t num_classes) const;

  const CsvOptions options_;
  const std::shared_ptr<const ExampleDecoder> decoder_;
  std::vector<std::string> columns_;
  bool columns_from_header_ = false;
  std::string first_file_;
  std::vector<size_t> first_column_;  // per feature
  size_t label_column_ = 0;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_CSV_INPUT_H_
