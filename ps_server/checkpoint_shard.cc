#include "ps_server/checkpoint_shard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/file_util.h"

namespace pstrain::ps {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'C', 'K', 'P', 'T', '0', '1'};

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Appends to an open file, keeping the CRC-32C of everything written.
class ShardFile {
 public:
  ShardFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  absl::Status Write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    crc_ = Crc32c(p, n, crc_);
    bytes_ += static_cast<int64_t>(n);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Errno("cannot write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  absl::Status Record(const std::string& bytes) {
    uint8_t len[8], crc[4];
    const uint64_t n = bytes.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    const uint32_t c = MaskCrc32c(Crc32c(bytes.data(), bytes.size()));
    for (int i = 0; i < 4; ++i) crc[i] = static_cast<uint8_t>(c >> (8 * i));
    if (absl::Status s = Write(len, 8); !s.ok()) return s;
    if (absl::Status s = Write(bytes.data(), bytes.size()); !s.ok()) return s;
    return Write(crc, 4);
  }
  int64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }

 private:
  const int fd_;
  const std::string path_;
  uint32_t crc_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace

absl::StatusOr<ShardWritten> WriteShard(const std::string& path, ShardContents shard) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  ShardFile file(fd, tmp);
  shard.header.set_num_tensors(static_cast<int32_t>(shard.tensors.size()));
  absl::Status s = file.Write(kMagic, sizeof(kMagic));
  if (s.ok()) s = file.Record(shard.header.SerializeAsString());
  for (size_t i = 0; s.ok() && i < shard.tensors.size(); ++i) {
    s = file.Record(shard.tensors[i].SerializeAsString());
  }
  if (s.ok() && ::fsync(fd) != 0) s = Errno("cannot fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("cannot close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Errno("cannot rename to", path);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ShardWritten{file.bytes(), file.crc()};
}

absl::StatusOr<ShardContents> ReadShard(const std::string& path) {
  auto contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  const std::string& raw = *contents;
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", what));
  };
  if (raw.size() < sizeof(kMagic) || std::memcmp(raw.data(), kMagic, sizeof(kMagic)) != 0) {
    return bad("not a checkpoint shard (bad magic)");
  }
  size_t at = sizeof(kMagic);
  // Record i: 0 is the header, i >= 1 is tensor i - 1; parsed in place.
  auto next = [&](int i, google::protobuf::MessageLite* out) -> absl::Status {
    const std::string what = i == 0 ? "header" : absl::StrCat("tensor ", i - 1);
    if (raw.size() - at < 8) return bad(absl::StrCat(what, ": cut short"));
    uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(raw[at + k]);
    if (n > raw.size() - at - 8 || raw.size() - at - 8 - n < 4) {
      return bad(absl::StrCat(what, ": cut short"));
    }
    const char* body = raw.data() + at + 8;
    uint32_t crc = 0;
    for (int k = 3; k >= 0; --k) crc = (crc << 8) | static_cast<unsigned char>(body[n + k]);
    if (UnmaskCrc32c(crc) != Crc32c(body, n)) {
      v1::TensorCheckpoint t;
      const bool named = i > 0 && t.ParseFromArray(body, static_cast<int>(n)) && !t.key().empty();
      return bad(absl::StrCat(what, named ? absl::StrCat(" (", t.key(), ")") : "",
                              ": checksum mismatch"));
    }
    if (!out->ParseFromArray(body, static_cast<int>(n))) {
      return bad(absl::StrCat(what, ": does not parse"));
    }
    at += 8 + n + 4;
    return absl::OkStatus();
  };
  ShardContents shard;
  if (absl::Status s = next(0, &shard.header); !s.ok()) return s;
  shard.tensors.resize(std::max(shard.header.num_tensors(), 0));
  for (int i = 0; i < shard.header.num_tensors(); ++i) {
    if (absl::Status s = next(i + 1, &shard.tensors[i]); !s.ok()) return s;
  }
  if (at != raw.size()) {
    return bad(absl::StrCat(raw.size() - at, " bytes after the ", shard.header.num_tensors(),
                            " tensors the header announces"));
  }
  return shard;
}

}  // namespace pstrain::ps
