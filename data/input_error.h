// The one form of each problem with a job's input, whatever its format (the
// IDX files of a data directory, CSV/TSV, TFRecord), so that a user reads
// the same message and a task exits with the same code for the same
// mistake (docs/data.md, "When the input is wrong"):
//
//   a missing directory   exit 2  no such directory DIR (where the input's
//                                 files DIR/PATTERN are looked for)
//   no matching files     exit 2  no file matches DIR/PATTERN
//   an unreadable file    exit 2  cannot read FILE: Permission denied (this
//                                 process runs as uid U, gid G: give that
//                                 user read access to FILE)
//                                 cannot read FILE: Is a directory
//                         exit 1  cannot read FILE: <an I/O error>
//   a bad record          exit 1  FILE line N: <what> (CSV/TSV)
//                                 FILE at byte N: <what> (TFRecord, IDX)
//                                 (--skip_bad_records passes over CSV and
//                                 TFRecord ones, counting them)
//
// The first three are the job's configuration or its volume (a
// --data_dir mistyped, a volume not mounted or not readable by the task's
// user); they are marked as such (base/exit_codes.h) so every role exits 2.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_INPUT_ERROR_H_
#define PSTRAIN_DATA_INPUT_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain::data {

// NotFound: "no such directory DIR (where the input's files LOOKED_FOR
// are looked for)".
absl::Status NoSuchDataDirectory(const std::string& dir, const std::string& looked_for);

// NotFound: "no file matches PATTERN" (the pattern with its directory).
absl::Status NoFileMatches(const std::string& pattern);

// "cannot read PATH: strerror(err)", with the uid, gid and what to grant
// for a permission error: PermissionDenied for EACCES and EPERM,
// FailedPrecondition for EISDIR, NotFound for ENOENT (each marked as the
// configuration's), Internal otherwise.
absl::Status CannotReadInput(const std::string& path, int err);

// Opens an input file for reading: its descriptor (O_CLOEXEC), which the
// caller owns. CannotReadInput when it cannot be opened or is a
// directory.
absl::StatusOr<int> OpenInputFile(const std::string& path);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_INPUT_ERROR_H_
