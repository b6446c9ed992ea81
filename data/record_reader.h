// What every reader of a record format gives: one record after another of
// one file (a TFRecord's data, a CSV row), with where each begins for
// errors. The formats: data/tfrecord.h, data/csv.h.
// Thread-compatible: one reader per thread.
#ifndef PSTRAIN_DATA_RECORD_READER_H_
#define PSTRAIN_DATA_RECORD_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::data {

class RecordReader {
 public:
  virtual ~RecordReader() = default;

  // The next record into `*record`: true, or false at the end of the file.
  // DataLoss naming the file and where the record begins when it is bad;
  // afterwards the reader is at the next record if can_continue(), else
  // the rest of the file cannot be read and Next returns false.
  virtual absl::StatusOr<bool> Next(std::string* record) = 0;
  // Passes over the next record, checking no more than it must to find
  // where it ends (for counting records): true, false at the end, or
  // Next's errors.
  virtual absl::StatusOr<bool> Skip() = 0;
  virtual bool can_continue() const = 0;
  // Where the next record begins, in the format's unit (a byte offset, a
  // line number), and that place in words: "PATH at byte N", "PATH line N".
  virtual int64_t offset() const = 0;
  virtual std::string Where(int64_t offset) const = 0;
  virtual const std::string& path() const = 0;
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_RECORD_READER_H_
