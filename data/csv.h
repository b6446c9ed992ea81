// CSV and TSV files: rows of fields split by a delimiter.
//
// With quoting (CSV, RFC 4180): a field that begins with a double quote
// runs to the matching closing quote and may hold delimiters, line ends and
// quotes written twice (""); a quote inside a field that does not begin
// with one is an ordinary character, as Python's csv module and pandas read
// it. Text between a closing quote and the next delimiter is an error.
// Without quoting (TSV, as IANA's text/tab-separated-values has it): a
// field is everything between two delimiters.
// Rows end at "\n" or "\r\n" outside quotes; blank lines are passed over;
// a UTF-8 byte order mark opening the file is dropped (spreadsheets write
// one).
// Thread-compatible.
#ifndef PSTRAIN_DATA_CSV_H_
#define PSTRAIN_DATA_CSV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/byte_source.h"
#include "data/record_reader.h"

namespace pstrain::data {

struct CsvDialect {
  char delimiter = ',';
  bool quoting = true;
};

// The fields of one row.
class CsvRow {
 public:
  // Splits `row` (without its line end). The fields are views into `row`
  // (or, for a quoted field with doubled quotes, into this object): valid
  // until `row` changes or the next Parse. InvalidArgument "field K: ..."
  // (K from 1) for text after a closing quote or a quote never closed.
  absl::Status Parse(absl::string_view row, const CsvDialect& dialect);
  size_t size() const { return fields_.size(); }
  absl::string_view field(size_t i) const { return fields_[i]; }

 private:
  std::vector<absl::string_view> fields_;
  std::string unquoted_;  // the values of quoted fields with doubled quotes
};

// `fields` as one row (no line end) that CsvRow::Parse gives back: with
// quoting, a field holding the delimiter, a quote, a line end, or leading
// with a quote, is quoted. InvalidArgument without quoting when a field
// holds the delimiter or a line end, which TSV cannot write.
absl::StatusOr<std::string> FormatCsvRow(const std::vector<std::string>& fields,
                                         const CsvDialect& dialect);

class CsvReader : public RecordReader {
 public:
  // Rows longer than this are taken for a quote never closed.
  static constexpr int64_t kMaxRowBytes = int64_t{64} << 20;

  // NotFound or a read error naming the path.
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(const std::string& path,
                                                         Compression compression,
                                                         const CsvDialect& dialect);

  // The next row's text, without its line end (it spans lines when a
  // quoted field holds line ends). DataLoss "PATH line N: ..." for a quote
  // not closed before the end of the file or kMaxRowBytes, or the source's
  // errors; the rest of the file is lost then.
  absl::StatusOr<bool> Next(std::string* record) override;
  absl::StatusOr<bool> Skip() override { return Next(&scratch_); }
  bool can_continue() const override { return !lost_; }
  // The line (from 1) the next row begins on.
  int64_t offset() const override { return line_; }
  std::string Where(int64_t line) const override;
  const std::string& path() const override { return path_; }

 private:
  CsvReader(std::string path, std::unique_ptr<ByteSource> source, const CsvDialect& dialect);
  // Makes at least `n` unread bytes available if the file has them: false
  // when it has fewer.
  absl::StatusOr<bool> Fill(size_t n);
  // Passes over blank lines before the next row.
  absl::Status SkipBlankLines();
  absl::Status Lose(absl::Status s) {
    lost_ = true;
    return s;
  }

  const std::string path_;
  std::unique_ptr<ByteSource> source_;
  const CsvDialect dialect_;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes in buffer_
  bool eof_ = false;
  bool started_ = false;
  int64_t line_ = 1;
  bool lost_ = false;
  absl::Status pending_;
  std::string scratch_;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_CSV_H_
