#include "data/input_error.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"

namespace pstrain::data {
namespace {

absl::Status ConfigurationsFault(absl::Status s) {
  return WithFailureKind(std::move(s), FailureKind::kBadConfig);
}

}  // namespace

absl::Status NoSuchDataDirectory(const std::string& dir, const std::string& looked_for) {
  return ConfigurationsFault(absl::NotFoundError(absl::StrCat(
      "no such directory ", dir, " (where the input's files ", looked_for, " are looked for)")));
}

absl::Status NoFileMatches(const std::string& pattern) {
  return ConfigurationsFault(absl::NotFoundError(absl::StrCat("no file matches ", pattern)));
}

absl::Status CannotReadInput(const std::string& path, int err) {
  std::string msg = absl::StrCat("cannot read ", path, ": ", std::strerror(err));
  switch (err) {
    case EACCES:
    case EPERM:
      absl::StrAppend(&msg, " (this process runs as uid ", ::geteuid(), ", gid ", ::getegid(),
                      ": give that user read access to ", path, ")");
      return ConfigurationsFault(absl::PermissionDeniedError(msg));
    case EISDIR:
      return ConfigurationsFault(absl::FailedPreconditionError(msg));
    case ENOENT:
      return ConfigurationsFault(absl::NotFoundError(msg));
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<int> OpenInputFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CannotReadInput(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return CannotReadInput(path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return CannotReadInput(path, EISDIR);
  }
  return fd;
}

}  // namespace pstrain::data
