#include "base/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "base/file_util.h"

namespace pstrain {
namespace {

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Append(absl::string_view data) override {
    const char* p = data.data();
    size_t n = data.size();
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return FileError("cannot write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return FileError("cannot fsync", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return FileError("cannot close", path_);
    return absl::OkStatus();
  }

 private:
  int fd_;
  const std::string path_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  uint64_t size() const override { return size_; }
  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    while (true) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return FileError("cannot read", path_);
    }
  }

 private:
  const int fd_;
  const std::string path_;
  const uint64_t size_;
};

class PosixEnv final : public Env {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return FileError("cannot create", path);
    return std::make_unique<PosixWritableFile>(fd, path);
  }
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FileError("cannot open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      absl::Status s = FileError("cannot stat", path);
      ::close(fd);
      return s;
    }
    return std::make_unique<PosixSequentialFile>(fd, path, static_cast<uint64_t>(st.st_size));
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return FileError("cannot rename to", to);
    return absl::OkStatus();
  }
  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return FileError("cannot remove", path);
    return absl::OkStatus();
  }
  absl::Status CreateDirs(const std::string& dir) override { return MakeDirs(dir); }
  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return FileError("cannot open directory", dir);
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return FileError("cannot fsync directory", dir);
    return absl::OkStatus();
  }
};

}  // namespace

namespace {

std::atomic<Env*>& DefaultSlot() {
  static std::atomic<Env*> slot{new PosixEnv()};
  return slot;
}

}  // namespace

Env* Env::Default() { return DefaultSlot().load(std::memory_order_acquire); }

void Env::SetDefault(Env* env) { DefaultSlot().store(env, std::memory_order_release); }

}  // namespace pstrain
