#include "data/csv.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::data {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 18;

}  // namespace

absl::Status CsvRow::Parse(absl::string_view row, const CsvDialect& dialect) {
  fields_.clear();
  unquoted_.clear();
  // A field's unquoted value is never longer than the row: views into
  // unquoted_ stay valid as it fills.
  unquoted_.reserve(row.size());
  const char d = dialect.delimiter;
  const char* p = row.data();
  const size_t n = row.size();
  size_t i = 0;
  while (true) {
    if (dialect.quoting && i < n && p[i] == '"') {
      const size_t field = fields_.size() + 1;
      const size_t begin = ++i;
      bool doubled = false;
      const size_t start = unquoted_.size();
      while (true) {
        const size_t q = row.find('"', i);
        if (q == absl::string_view::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("field ", field, ": its opening quote is not closed"));
        }
        if (q + 1 < n && p[q + 1] == '"') {  // a quote written twice
          doubled = true;
          unquoted_.append(p + i, q + 1 - i);
          i = q + 2;
          continue;
        }
        if (doubled) {
          unquoted_.append(p + i, q - i);
          fields_.emplace_back(unquoted_.data() + start, unquoted_.size() - start);
        } else {
          fields_.emplace_back(p + begin, q - begin);
        }
        i = q + 1;
        break;
      }
      if (i == n) return absl::OkStatus();
      if (p[i] != d) {
        return absl::InvalidArgumentError(
            absl::StrCat("field ", field, ": text after its closing quote (\"",
                         row.substr(i, std::min<size_t>(20, row.find(d, i) - i)), "\")"));
      }
      ++i;
      continue;
    }
    size_t k = i;
    while (k < n && p[k] != d) ++k;
    fields_.emplace_back(p + i, k - i);
    if (k == n) return absl::OkStatus();
    i = k + 1;
  }
}

absl::StatusOr<std::string> FormatCsvRow(const std::vector<std::string>& fields,
                                         const CsvDialect& dialect) {
  std::string out;
  const char d = dialect.delimiter;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (i > 0) out.push_back(d);
    const bool special = f.find_first_of(std::string{d, '\n', '\r'}) != std::string::npos;
    if (!dialect.quoting) {
      if (special) {
        return absl::InvalidArgumentError(
            absl::StrCat("field ", i + 1,
                         " holds the delimiter or a line end, which a row "
                         "without quoting cannot hold"));
      }
      out += f;
      continue;
    }
    // A lone empty field is quoted, or the row would be a blank line.
    if (special || f.find('"') != std::string::npos || (f.empty() && fields.size() == 1)) {
      out.push_back('"');
      for (char c : f) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
      }
      out.push_back('"');
    } else {
      out += f;
    }
  }
  if (!dialect.quoting && out.empty()) {
    return absl::InvalidArgumentError("a row of one empty field is a blank line");
  }
  return out;
}

CsvReader::CsvReader(std::string path, std::unique_ptr<ByteSource> source,
                     const CsvDialect& dialect)
    : path_(std::move(path)), source_(std::move(source)), dialect_(dialect) {
  buffer_.resize(kBufferBytes);
}

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(const std::string& path,
                                                           Compression compression,
                                                           const CsvDialect& dialect) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path, compression);
  if (!source.ok()) return source.status();
  return std::unique_ptr<CsvReader>(new CsvReader(path, std::move(*source), dialect));
}

std::string CsvReader::Where(int64_t line) const { return absl::StrCat(path_, " line ", line); }

absl::StatusOr<bool> CsvReader::Fill(size_t n) {
  while (end_ - begin_ < n && !eof_) {
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    absl::StatusOr<int64_t> got =
        source_->Read(buffer_.data() + end_, static_cast<int64_t>(buffer_.size() - end_));
    if (!got.ok()) return got.status();
    if (*got == 0) eof_ = true;
    end_ += static_cast<size_t>(*got);
  }
  return end_ - begin_ >= n;
}

absl::Status CsvReader::SkipBlankLines() {
  while (true) {
    absl::StatusOr<bool> have = Fill(1);
    if (!have.ok()) return have.status();
    if (!*have) return absl::OkStatus();
    const char c = buffer_[begin_];
    if (c == '\n') {
      ++begin_;
      ++line_;
      continue;
    }
    if (c != '\r') return absl::OkStatus();
    have = Fill(2);
    if (!have.ok()) return have.status();
    if (!*have || buffer_[begin_ + 1] != '\n') return absl::OkStatus();
    begin_ += 2;
    ++line_;
  }
}

absl::StatusOr<bool> CsvReader::Next(std::string* record) {
  record->clear();
  if (!pending_.ok()) return Lose(std::exchange(pending_, absl::OkStatus()));
  if (lost_) return false;
  if (!started_) {
    started_ = true;
    absl::StatusOr<bool> have = Fill(3);
    if (!have.ok()) return Lose(have.status());
    if (*have && std::memcmp(buffer_.data() + begin_, "\xEF\xBB\xBF", 3) == 0) begin_ += 3;
    if (absl::Status s = SkipBlankLines(); !s.ok()) return Lose(s);
  }
  const int64_t first_line = line_;
  enum State { kFieldStart, kUnquoted, kQuoted, kAfterQuote } state = kFieldStart;
  const char d = dialect_.delimiter;
  bool ended = false;
  while (!ended) {
    if (begin_ == end_) {
      absl::StatusOr<bool> have = Fill(1);
      if (!have.ok()) return Lose(have.status());
      if (!*have) break;
    }
    const char* p = buffer_.data();
    size_t i = begin_;
    if (!dialect_.quoting) {
      const void* nl = std::memchr(p + begin_, '\n', end_ - begin_);
      i = nl == nullptr ? end_ : static_cast<size_t>(static_cast<const char*>(nl) - p);
      ended = nl != nullptr;
    } else {
      for (; i < end_; ++i) {
        const char c = p[i];
        if (c == '\n') {
          if (state != kQuoted) {
            ended = true;
            break;
          }
          ++line_;
          continue;
        }
        switch (state) {
          case kFieldStart:
          case kAfterQuote:
            state = c == '"' ? kQuoted : c == d ? kFieldStart : kUnquoted;
            break;
          case kUnquoted:
            if (c == d) state = kFieldStart;
            break;
          case kQuoted:
            if (c == '"') state = kAfterQuote;
            break;
        }
      }
    }
    record->append(p + begin_, i - begin_);
    begin_ = ended ? i + 1 : i;
    if (static_cast<int64_t>(record->size()) > kMaxRowBytes) {
      return Lose(
          absl::DataLossError(absl::StrCat(Where(first_line), ": the row runs past ",
                                           kMaxRowBytes >> 20, " MiB (is a quote not closed?)")));
    }
  }
  if (!ended) {
    if (state == kQuoted) {
      return Lose(absl::DataLossError(absl::StrCat(
          Where(first_line), ": a quoted field is not closed before the end of the file")));
    }
    if (record->empty()) return false;
  }
  if (ended) ++line_;
  if (!record->empty() && record->back() == '\r') record->pop_back();
  if (!ended && record->empty()) return false;  // a lone "\r" ends the file
  // So that offset() names the next row's line; an error reading ahead is
  // the next call's.
  pending_ = SkipBlankLines();
  return true;
}

}  // namespace pstrain::data
