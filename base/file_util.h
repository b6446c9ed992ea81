// Small file helpers with Status errors that name the path. Stateless;
// thread-safe.
#ifndef PSTRAIN_BASE_FILE_UTIL_H_
#define PSTRAIN_BASE_FILE_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Creates `dir` and its parents (like mkdir -p). Internal naming the path on
// failure.
absl::Status MakeDirs(const std::string& dir);

// Writes `contents` to path.tmp, fsyncs it, renames it over `path` and fsyncs
// the directory, so readers see the old file or the new one, never a part.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// An error naming `what` and the path, from errno: NotFound for ENOENT,
// else Internal. A permission error (EACCES, EPERM) also names this
// process's uid and gid and the directory to grant (PermissionHint): what
// a container's user needs to fix a volume mounted from the host.
absl::Status FileError(absl::string_view what, const std::string& path);

// For a permission error `err` on `path`: " (this process runs as uid U,
// gid G: give that user write access to DIR, or run the task as one that
// has it)"; empty for any other error.
std::string PermissionHint(int err, const std::string& path);

// Finishes a file written through `fd` (open on `tmp`): fsyncs and closes
// it, renames `tmp` over `path` and fsyncs the directory, so readers see the
// old file or the new one, never a part. Closes `fd` whatever happens.
absl::Status CommitFile(int fd, const std::string& tmp, const std::string& path);

// Whole file. NotFound when it does not exist; Internal on other errors.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// The absolute path of this process's executable (/proc/self/exe), or ""
// when it cannot be read.
std::string SelfExecutablePath();

}  // namespace pstrain

#endif  // PSTRAIN_BASE_FILE_UTIL_H_
