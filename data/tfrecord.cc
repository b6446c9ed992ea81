#include "data/tfrecord.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/file_util.h"

namespace pstrain::data {
namespace {

void PutUint64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
void PutUint32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetUint64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint32_t GetUint32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// A record's 12 bytes before its data: the length and its masked CRC.
void PutHeader(uint64_t length, char* head) {
  PutUint64(length, head);
  PutUint32(MaskCrc32c(Crc32c(head, 8)), head + 8);
}
// A record's 4 bytes after its data: the data's masked CRC.
void PutFooter(absl::string_view data, char* tail) {
  PutUint32(MaskCrc32c(Crc32c(data.data(), data.size())), tail);
}

// Records over this are taken for a corrupt length that its CRC happens to
// match, rather than allocated.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 31;

}  // namespace

std::string FrameRecord(absl::string_view data) {
  std::string out(12 + data.size() + 4, '\0');
  PutHeader(data.size(), &out[0]);
  if (!data.empty()) std::memcpy(&out[12], data.data(), data.size());
  PutFooter(data, &out[12 + data.size()]);
  return out;
}

// The temporary file being written: its descriptor (for the commit) and a
// zlib stream over a duplicate of it (transparent when not compressed).
struct TfRecordWriter::File {
  std::string tmp;
  int fd = -1;
  gzFile gz = nullptr;
  ~File() {
    if (gz != nullptr) gzclose(gz);
    if (fd >= 0) {
      close(fd);
      unlink(tmp.c_str());
    }
  }
};

TfRecordWriter::TfRecordWriter(std::string path, std::unique_ptr<File> file)
    : path_(std::move(path)), file_(std::move(file)) {}

TfRecordWriter::~TfRecordWriter() = default;

absl::StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Open(const std::string& path,
                                                                     Compression compression) {
  auto file = std::make_unique<File>();
  file->tmp = path + ".tmp";
  file->fd = open(file->tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file->fd < 0) return FileError("create", file->tmp);
  const int dup_fd = dup(file->fd);
  if (dup_fd < 0) return FileError("dup", file->tmp);
  file->gz = gzdopen(dup_fd, compression == Compression::kGzip ? "wb6" : "wbT");
  if (file->gz == nullptr) {
    close(dup_fd);
    return absl::InternalError(absl::StrCat("cannot open a zlib stream on ", file->tmp));
  }
  gzbuffer(file->gz, 1 << 18);
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(path, std::move(file)));
}

absl::Status TfRecordWriter::Write(absl::string_view record) {
  if (file_ == nullptr) return absl::FailedPreconditionError(path_ + " is already closed");
  char head[12], tail[4];
  PutHeader(record.size(), head);
  PutFooter(record, tail);
  auto put = [&](const char* p, size_t n) {
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      if (gzwrite(file_->gz, p, chunk) != static_cast<int>(chunk)) return false;
      p += chunk;
      n -= chunk;
    }
    return true;
  };
  if (!put(head, 12) || !put(record.data(), record.size()) || !put(tail, 4)) {
    int err = 0;
    return absl::InternalError(
        absl::StrCat("writing ", file_->tmp, ": ", gzerror(file_->gz, &err)));
  }
  ++records_;
  return absl::OkStatus();
}

absl::Status TfRecordWriter::Close() {
  if (file_ == nullptr) return absl::FailedPreconditionError(path_ + " is already closed");
  std::unique_ptr<File> file = std::move(file_);
  const int rc = gzclose(file->gz);
  file->gz = nullptr;
  if (rc != Z_OK) {
    return absl::InternalError(absl::StrCat("finishing ", file->tmp, ": zlib error ", rc));
  }
  const int fd = file->fd;
  file->fd = -1;  // CommitFile closes it
  return CommitFile(fd, file->tmp, path_);
}

TfRecordReader::TfRecordReader(std::string path, std::unique_ptr<ByteSource> source)
    : path_(std::move(path)), source_(std::move(source)) {}

TfRecordReader::~TfRecordReader() = default;

absl::StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(const std::string& path,
                                                                     Compression compression) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path, compression);
  if (!source.ok()) return source.status();
  return std::unique_ptr<TfRecordReader>(new TfRecordReader(path, std::move(*source)));
}

std::string TfRecordReader::Where(int64_t offset) const {
  return absl::StrCat(path_, " at byte ", offset);
}

absl::Status TfRecordReader::Bad(int64_t at, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(Where(at), ": ", what));
}

absl::StatusOr<bool> TfRecordReader::Frame(uint64_t* length) {
  if (lost_) return false;
  const int64_t at = offset_;
  char head[12];
  absl::StatusOr<int64_t> got = source_->Read(head, 12);
  if (!got.ok()) {
    lost_ = true;
    return got.status();
  }
  if (*got == 0) return false;  // a clean end
  if (*got < 12) {
    lost_ = true;
    return Bad(at, absl::StrCat("record header cut short (", *got, " of 12 bytes)"));
  }
  *length = GetUint64(head);
  if (MaskCrc32c(Crc32c(head, 8)) != GetUint32(head + 8)) {
    lost_ = true;
    return Bad(at, "the record length's checksum does not match (corrupt length or checksum)");
  }
  if (*length > kMaxRecordBytes) {
    lost_ = true;
    return Bad(at,
               absl::StrCat("record length ", *length, " is over the limit of ", kMaxRecordBytes));
  }
  return true;
}

absl::Status TfRecordReader::CutShort(int64_t at, uint64_t length, int64_t got) {
  lost_ = true;
  return Bad(at, absl::StrCat("record of ", length, " bytes cut short (the file ends ", got,
                              " bytes into its ", length + 4, ")"));
}

absl::StatusOr<bool> TfRecordReader::Next(std::string* record) {
  const int64_t at = offset_;
  uint64_t length = 0;
  absl::StatusOr<bool> framed = Frame(&length);
  if (!framed.ok() || !*framed) return framed;
  record->resize(length + 4);
  absl::StatusOr<int64_t> got = source_->Read(record->data(), static_cast<int64_t>(length) + 4);
  if (!got.ok()) {
    lost_ = true;
    return got.status();
  }
  if (*got < static_cast<int64_t>(length) + 4) return CutShort(at, length, *got);
  offset_ = at + 12 + static_cast<int64_t>(length) + 4;
  const uint32_t stored = GetUint32(record->data() + length);
  record->resize(length);
  if (MaskCrc32c(Crc32c(record->data(), length)) != stored) {
    return Bad(at, absl::StrCat("the checksum of the record's ", length,
                                " bytes of data does not match (corrupt data or checksum)"));
  }
  return true;
}

absl::StatusOr<bool> TfRecordReader::Skip() {
  const int64_t at = offset_;
  uint64_t length = 0;
  absl::StatusOr<bool> framed = Frame(&length);
  if (!framed.ok() || !*framed) return framed;
  const int64_t want = static_cast<int64_t>(length) + 4;
  absl::StatusOr<int64_t> got = source_->Skip(want);
  if (!got.ok()) {
    lost_ = true;
    return got.status();
  }
  if (*got < want) return CutShort(at, length, *got);
  offset_ = at + 12 + want;
  return true;
}

absl::StatusOr<std::vector<std::string>> ReadAllRecords(const std::string& path,
                                                        Compression compression) {
  auto reader = TfRecordReader::Open(path, compression);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> out;
  std::string record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) return out;
    out.push_back(record);
  }
}

std::string TfRecordSplitPath(const std::string& out, const std::string& split, int i, int n,
                              Compression compression) {
  return absl::StrFormat("%s/%s-%05d-of-%05d.tfrecord%s", out, split, i, n,
                         compression == Compression::kGzip ? ".gz" : "");
}

absl::Status CheckNoSplitFiles(const std::string& out) {
  std::error_code ec;
  std::vector<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "train-") || absl::StartsWith(name, "test-")) {
      present.push_back(name);
    }
  }
  if (present.empty()) return absl::OkStatus();
  std::sort(present.begin(), present.end());
  return absl::FailedPreconditionError(absl::StrCat(out, " already holds ", present[0],
                                                    ": write to a directory without data files"));
}

}  // namespace pstrain::data
