#include "data/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "data/input_error.h"

namespace pstrain::data {

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

// A zlib stream for GZIP, stdio otherwise.
struct ByteSource::Handle {
  gzFile gz = nullptr;
  FILE* plain = nullptr;
  int64_t size = 0;  // a plain file's, when opened
  ~Handle() {
    if (gz != nullptr) gzclose(gz);
    if (plain != nullptr) fclose(plain);
  }
};

ByteSource::ByteSource(std::string path, std::unique_ptr<Handle> handle)
    : path_(std::move(path)), handle_(std::move(handle)) {}

ByteSource::~ByteSource() = default;

absl::StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path,
                                                             Compression compression) {
  auto handle = std::make_unique<Handle>();
  absl::StatusOr<int> fd = OpenInputFile(path);
  if (!fd.ok()) return fd.status();
  if (compression == Compression::kGzip) {
    handle->gz = gzdopen(*fd, "rb");
    if (handle->gz == nullptr) {
      close(*fd);
      return absl::InternalError(absl::StrCat("cannot open a zlib stream on ", path));
    }
    gzbuffer(handle->gz, 1 << 18);
  } else {
    handle->plain = fdopen(*fd, "rb");
    if (handle->plain == nullptr) {
      const int err = errno;
      close(*fd);
      return CannotReadInput(path, err);
    }
    setvbuf(handle->plain, nullptr, _IOFBF, 1 << 18);
    struct stat st;
    if (fstat(fileno(handle->plain), &st) != 0) return CannotReadInput(path, errno);
    handle->size = st.st_size;
  }
  return std::unique_ptr<ByteSource>(new ByteSource(path, std::move(handle)));
}

absl::StatusOr<int64_t> ByteSource::Read(char* out, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    int64_t got;
    if (handle_->gz != nullptr) {
      got = gzread(handle_->gz, out + done, chunk);
      int err = Z_OK;
      const char* message = gzerror(handle_->gz, &err);
      if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
        return absl::DataLossError(absl::StrCat(path_, " at byte ", position_ + done,
                                                ": the GZIP stream is corrupt or cut short (",
                                                message, ")"));
      }
    } else {
      got = static_cast<int64_t>(fread(out + done, 1, chunk, handle_->plain));
      if (got < static_cast<int64_t>(chunk) && ferror(handle_->plain)) {
        return CannotReadInput(path_, errno);
      }
    }
    if (got == 0) break;
    done += got;
  }
  position_ += done;
  return done;
}

absl::StatusOr<int64_t> ByteSource::Skip(int64_t n) {
  // A plain file's long runs are seeked over (against the size it had at
  // Open); short ones are read from the buffer, as a seek would drop it.
  if (handle_->plain != nullptr && n > kSeekBytes) {
    if (fseeko(handle_->plain, n, SEEK_CUR) != 0) return FileError("seek in", path_);
    const int64_t got = std::min<int64_t>(n, std::max<int64_t>(0, handle_->size - position_));
    position_ += got;
    return got;
  }
  scratch_.resize(std::min<int64_t>(n, 1 << 16));
  int64_t got = 0;
  while (got < n) {
    const int64_t want = std::min<int64_t>(n - got, static_cast<int64_t>(scratch_.size()));
    absl::StatusOr<int64_t> r = Read(scratch_.data(), want);
    if (!r.ok()) return r.status();
    got += *r;
    if (*r < want) break;
  }
  return got;
}

}  // namespace pstrain::data
