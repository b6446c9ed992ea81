// Writing TFRecord files for tests: a list of records to one file, and a
// directory of files of numbered Examples.
#ifndef PSTRAIN_DATA_TESTING_TFRECORD_FILES_H_
#define PSTRAIN_DATA_TESTING_TFRECORD_FILES_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/testing/temp_dir.h"
#include "data/tfrecord.h"

namespace pstrain::testing {

// Writes `records` as the TFRecord file `path`.
inline absl::Status WriteRecords(const std::string& path, data::Compression compression,
                                 const std::vector<std::string>& records) {
  auto writer = data::TfRecordWriter::Open(path, compression);
  if (!writer.ok()) return writer.status();
  for (const std::string& r : records) {
    if (absl::Status s = (*writer)->Write(r); !s.ok()) return s;
  }
  return (*writer)->Close();
}

// `files` files "part-00000.tfrecord[.gz]"... of `per_file` records each
// under a fresh directory `name` of the test's temporary directory, record
// i of file f being `example(f * per_file + i)`; returns the directory.
inline absl::StatusOr<std::string> WriteExampleFiles(const std::string& name, int files,
                                                     int per_file, bool gzip,
                                                     absl::FunctionRef<std::string(int)> example) {
  const std::string dir = TempDir() + "/" + name;
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  for (int f = 0; f < files; ++f) {
    std::vector<std::string> records;
    for (int i = 0; i < per_file; ++i) records.push_back(example(f * per_file + i));
    const std::string path = absl::StrFormat("%s/part-%05d.tfrecord%s", dir, f, gzip ? ".gz" : "");
    absl::Status s =
        WriteRecords(path, gzip ? data::Compression::kGzip : data::Compression::kNone, records);
    if (!s.ok()) return s;
  }
  return dir;
}

}  // namespace pstrain::testing

#endif  // PSTRAIN_DATA_TESTING_TFRECORD_FILES_H_
