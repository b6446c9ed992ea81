// Part of a record file: records [begin, end) of `path`, as a TensorFlow
// Datasets split slice selects them from a shard ("train[:80%]" ends
// inside one), or the whole file.
// RangeReader is thread-compatible.
#ifndef PSTRAIN_DATA_RECORD_RANGE_H_
#define PSTRAIN_DATA_RECORD_RANGE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/record_reader.h"

namespace pstrain::data {

struct RecordRange {
  std::string path;
  int64_t begin = 0;
  int64_t end = -1;  // -1: to the file's end
  bool whole() const { return begin == 0 && end < 0; }
};

// `inner` (a reader at the start of its file) reading only the records
// [begin, end): the first Next or Skip passes over `begin` records (Skip:
// their framing only), and the reader ends after end - begin more. A file
// that ends first is DataLoss "PATH holds N records; the range needs M"
// (a shard shorter than its dataset's metadata says). Bad records count as
// records wherever the inner reader goes on past them.
class RangeReader final : public RecordReader {
 public:
  RangeReader(std::unique_ptr<RecordReader> inner, int64_t begin, int64_t end)
      : inner_(std::move(inner)), begin_(begin), end_(end) {}

  absl::StatusOr<bool> Next(std::string* record) override;
  absl::StatusOr<bool> Skip() override;
  bool can_continue() const override { return inner_->can_continue(); }
  int64_t offset() const override { return inner_->offset(); }
  std::string Where(int64_t offset) const override { return inner_->Where(offset); }
  const std::string& path() const override { return inner_->path(); }

 private:
  absl::Status PassBegin();
  // Before each record: false at the range's end, or the file's end early
  // as DataLoss.
  absl::StatusOr<bool> More(bool got);

  std::unique_ptr<RecordReader> inner_;
  const int64_t begin_;
  const int64_t end_;
  int64_t at_ = 0;  // records of the file behind the reader
  bool passed_ = false;
};

// `reader` limited to `range` (itself when the range is the whole file).
std::unique_ptr<RecordReader> LimitToRange(std::unique_ptr<RecordReader> reader,
                                           const RecordRange& range);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_RECORD_RANGE_H_
