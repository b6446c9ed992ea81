#include "data/tfrecord.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/file_util.h"

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

absl::StatusOr<Compression> ParseCompression(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  if (upper.empty() || upper == "NONE") return Compression::kNone;
  if (upper == "GZIP") return Compression::kGzip;
  return absl::InvalidArgumentError(
      absl::StrCat("compression \"", name, "\" is not one of \"\", \"NONE\", \"GZIP\""));
}

Compression CompressionForPath(absl::string_view path) {
  return absl::EndsWith(path, ".gz") ? Compression::kGzip : Compression::kNone;
}

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

// Where records are read from: a zlib stream for GZIP, stdio otherwise
// (so a plain file is read as it is, whatever its first bytes).
struct TfRecordReader::Source {
  gzFile gz = nullptr;
  FILE* plain = nullptr;
  ~Source() {
    if (gz != nullptr) gzclose(gz);
    if (plain != nullptr) fclose(plain);
  }
};

TfRecordReader::TfRecordReader(std::string path, std::unique_ptr<Source> source)
    : path_(std::move(path)), source_(std::move(source)) {}

TfRecordReader::~TfRecordReader() = default;

absl::StatusOr<std::unique_ptr<TfRecordReader>> TfRecordReader::Open(const std::string& path,
                                                                     Compression compression) {
  auto source = std::make_unique<Source>();
  if (compression == Compression::kGzip) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FileError("open", path);
    source->gz = gzdopen(fd, "rb");
    if (source->gz == nullptr) {
      close(fd);
      return absl::InternalError(absl::StrCat("cannot open a zlib stream on ", path));
    }
    gzbuffer(source->gz, 1 << 18);
  } else {
    source->plain = fopen(path.c_str(), "rbe");
    if (source->plain == nullptr) return FileError("open", path);
    setvbuf(source->plain, nullptr, _IOFBF, 1 << 18);
  }
  return std::unique_ptr<TfRecordReader>(new TfRecordReader(path, std::move(source)));
}

absl::StatusOr<int64_t> TfRecordReader::Read(char* out, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    int64_t got;
    if (source_->gz != nullptr) {
      got = gzread(source_->gz, out + done, chunk);
      int err = Z_OK;
      const char* message = gzerror(source_->gz, &err);
      if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
        return absl::DataLossError(
            absl::StrCat(path_, ": the GZIP stream is corrupt or cut short (", message, ") after ",
                         offset_ + done, " uncompressed bytes"));
      }
    } else {
      got = static_cast<int64_t>(fread(out + done, 1, chunk, source_->plain));
      if (got < static_cast<int64_t>(chunk) && ferror(source_->plain)) {
        return FileError("read", path_);
      }
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

absl::Status TfRecordReader::Bad(int64_t at, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path_, " at byte ", at, ": ", what));
}

absl::StatusOr<bool> TfRecordReader::Frame(uint64_t* length) {
  if (lost_) return false;
  const int64_t at = offset_;
  char head[12];
  absl::StatusOr<int64_t> got = Read(head, 12);
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
  absl::StatusOr<int64_t> got = Read(record->data(), static_cast<int64_t>(length) + 4);
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
  int64_t got = 0;
  if (source_->plain != nullptr) {
    // Seek over the data, then see whether the file held it.
    const int64_t here = at + 12;
    if (fseeko(source_->plain, want, SEEK_CUR) != 0) return FileError("seek in", path_);
    struct stat st;
    if (fstat(fileno(source_->plain), &st) != 0) return FileError("stat", path_);
    got = std::min<int64_t>(want, std::max<int64_t>(0, st.st_size - here));
  } else {
    scratch_.resize(std::min<int64_t>(want, 1 << 16));
    while (got < want) {
      const int64_t n = std::min<int64_t>(want - got, static_cast<int64_t>(scratch_.size()));
      absl::StatusOr<int64_t> r = Read(scratch_.data(), n);
      if (!r.ok()) {
        lost_ = true;
        return r.status();
      }
      got += *r;
      if (*r < n) break;
    }
  }
  if (got < want) return CutShort(at, length, got);
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

}  // namespace pstrain::data
