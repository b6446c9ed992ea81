#include "data/record_range.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::data {

absl::Status RangeReader::PassBegin() {
  passed_ = true;
  while (at_ < begin_) {
    absl::StatusOr<bool> more = inner_->Skip();
    if (!more.ok()) return more.status();
    if (!*more) {
      return absl::DataLossError(absl::StrCat(
          inner_->path(), " holds ", at_, " records; the range needs ", end_ >= 0 ? end_ : begin_));
    }
    ++at_;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RangeReader::More(bool got) {
  if (got) {
    ++at_;
    return true;
  }
  if (end_ >= 0 && at_ < end_) {
    return absl::DataLossError(
        absl::StrCat(inner_->path(), " holds ", at_, " records; the range needs ", end_));
  }
  return false;
}

absl::StatusOr<bool> RangeReader::Next(std::string* record) {
  if (!passed_) {
    if (absl::Status s = PassBegin(); !s.ok()) return s;
  }
  if (end_ >= 0 && at_ >= end_) return false;
  absl::StatusOr<bool> got = inner_->Next(record);
  if (!got.ok()) {
    // A bad record is still a record of the range when the file goes on.
    if (inner_->can_continue()) ++at_;
    return got.status();
  }
  return More(*got);
}

absl::StatusOr<bool> RangeReader::Skip() {
  if (!passed_) {
    if (absl::Status s = PassBegin(); !s.ok()) return s;
  }
  if (end_ >= 0 && at_ >= end_) return false;
  absl::StatusOr<bool> got = inner_->Skip();
  if (!got.ok()) return got.status();
  return More(*got);
}

std::unique_ptr<RecordReader> LimitToRange(std::unique_ptr<RecordReader> reader,
                                           const RecordRange& range) {
  if (range.whole()) return reader;
  return std::make_unique<RangeReader>(std::move(reader), range.begin, range.end);
}

}  // namespace pstrain::data
