// The file system as checkpoint code reaches it (LevelDB's Env): a PS
// writes and reads its checkpoint shards, and a local run its checkpoints,
// through an Env, so that tests inject what storage does to them (a write
// that stalls half way, a read that fails, an fsync that does) by wrapping
// the real one, with no hook in production code. Env::Default() is the
// POSIX file system. Implementations are thread-safe; a file object is
// used by one thread at a time.
#ifndef PSTRAIN_BASE_ENV_H_
#define PSTRAIN_BASE_ENV_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// A file being written. Errors name the path.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Flushes what was appended to stable storage.
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
};

// A file read front to back. Errors name the path.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // The file's size when it was opened.
  virtual uint64_t size() const = 0;
  // Reads up to `n` bytes into `dst`; returns how many (0 at the end).
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The Env of this process: the POSIX file system unless a test binary's
  // main chose another (SetDefault); never null.
  static Env* Default();
  // For a test binary's main only, before any other thread starts: the
  // Env that Default() returns from now on (never null; never destroyed).
  static void SetDefault(Env* env);

  // Creates (or truncates) `path` for writing. NotFound when its directory
  // does not exist, Internal on other errors; both name the path.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Opens `path` for reading. NotFound when it does not exist.
  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) = 0;
  // Renames `from` over `to`, atomically.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual absl::Status RemoveFile(const std::string& path) = 0;
  // Creates `dir` and its parents (mkdir -p).
  virtual absl::Status CreateDirs(const std::string& dir) = 0;
  // Flushes `dir`'s entries (a rename in it) to stable storage.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
};

// Forwards every call to `target` (not owned): the base of a test's Env
// that changes some calls and leaves the rest as they are.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    return target_->NewSequentialFile(path);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  absl::Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  absl::Status CreateDirs(const std::string& dir) override { return target_->CreateDirs(dir); }
  absl::Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }

 private:
  Env* const target_;
};

}  // namespace pstrain

#endif  // PSTRAIN_BASE_ENV_H_
