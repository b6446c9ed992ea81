#include "base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

std::string PermissionHint(int err, const std::string& path) {
  if (err != EACCES && err != EPERM) return "";
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  return absl::StrCat(" (this process runs as uid ", ::getuid(), ", gid ", ::getgid(),
                      ": give that user write access to ", dir,
                      ", or run the task as one that has it)");
}

absl::Status FileError(absl::string_view what, const std::string& path) {
  const int e = errno;
  std::string msg =
      absl::StrCat(what, " ", path, ": ", std::strerror(e), PermissionHint(e, path));
  return e == ENOENT ? absl::NotFoundError(msg) : absl::InternalError(msg);
}

namespace {
absl::Status Errno(absl::string_view what, const std::string& path) {
  return FileError(what, path);
}
}  // namespace

absl::Status CommitFile(int fd, const std::string& tmp, const std::string& path) {
  if (::fsync(fd) != 0) {
    absl::Status s = Errno("cannot fsync", tmp);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return Errno("cannot close", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Errno("cannot create directory", prefix);
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("cannot write", tmp);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  return CommitFile(fd, tmp, path);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  // Sized once from the file's length (GiB-sized checkpoint shards must not
  // be copied while a string grows), then read straight into place; a file
  // that grows meanwhile is read to its end all the same.
  struct stat st;
  std::string out;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(std::max<size_t>(out.size() * 2, 1 << 16));
    ssize_t n = ::read(fd, out.data() + done, std::min<size_t>(out.size() - done, 1 << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

std::string SelfExecutablePath() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf));
  if (n <= 0 || n == static_cast<ssize_t>(sizeof(buf))) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace pstrain
