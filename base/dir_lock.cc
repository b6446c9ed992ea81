#include "base/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"

namespace pstrain {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path, int err) {
  return absl::FailedPreconditionError(absl::StrCat("cannot ", what, " ", path, ": ",
                                                    std::strerror(err), PermissionHint(err, path)));
}

// The holder's line, as far as it wrote it.
std::string ReadHolder(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "a process that has not said who it is yet";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& dir,
                                                          absl::string_view holder) {
  std::string path = dir + "/LOCK";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create the lock file", path, errno);
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return Errno("lock", path, err);
    }
    std::string who = ReadHolder(fd);
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is in use (", path, " held by: ", who, ")"));
  }
  return std::unique_ptr<DirLock>(new DirLock(std::move(path), fd, std::string(holder)));
}

absl::Status DirLock::Claim() {
  const std::string line = absl::StrCat(holder_, "\n");
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    return Errno("write", path_, errno);
  }
  return absl::OkStatus();
}

DirLock::~DirLock() { ::close(fd_); }

std::string ThisProcessAsHolder(absl::string_view what) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  return absl::StrCat("pid ", ::getpid(), " on host ", host, " since ",
                      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()),
                      what);
}

}  // namespace pstrain
