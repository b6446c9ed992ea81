// One owner per directory: an exclusive advisory lock (flock(2)) on
// <dir>/LOCK, held for as long as the DirLock lives. The kernel releases it
// when its holder exits, however it exits, so a directory left by a process
// that died is free at once; a second holder, in this process or another,
// is refused with the holder's own words (who, where, since when), which it
// wrote into the file once it claimed the directory. Taking the lock
// changes no byte of the file: a process that takes it, then finds it must
// not go on (a relaunch refused), leaves the file as its predecessor wrote
// it. Used by the chief: one job per output directory. Not thread-safe: one
// owner calls Claim.
//
// The lock is as good as the file system's flock: local file systems and
// NFSv4 honour it across hosts; an NFSv3 mount without lockd does not.
#ifndef PSTRAIN_BASE_DIR_LOCK_H_
#define PSTRAIN_BASE_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

class DirLock {
 public:
  // Locks `dir` (which must exist), creating the lock file when it is
  // missing but writing nothing into it: `holder` (one line saying who
  // holds it) is written by Claim. FailedPrecondition when another holds
  // it, quoting that holder's line ("held by: ..."; until that holder
  // claims, the line of the one before it); the file system's error,
  // naming the file, when the file cannot be created or locked (a
  // read-only directory, say).
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& dir,
                                                          absl::string_view holder);
  // Replaces the file's text with the holder line given to Acquire, for
  // the refusals of later contenders. The file system's error naming the
  // file when it cannot be written (the lock is kept).
  absl::Status Claim();
  ~DirLock();  // releases the lock; the file stays
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DirLock(std::string path, int fd, std::string holder)
      : path_(std::move(path)), fd_(fd), holder_(std::move(holder)) {}
  const std::string path_;
  const int fd_;
  const std::string holder_;
};

// A holder line for this process: "pid 123 on host h since 2026-11-28
// 10:02:03 UTC" followed by `what` (", chief:0 of run ...").
std::string ThisProcessAsHolder(absl::string_view what);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_DIR_LOCK_H_
