// The bytes of one input file, read in order: through zlib for a GZIP file,
// as they are otherwise (so a plain file is read whatever its first bytes).
// The readers of record formats (data/tfrecord.h, data/csv.h) sit on it.
//
// Errors name the file: NotFound or a read error at Open and Read, DataLoss
// for a GZIP stream that is corrupt or cut short, with how many
// uncompressed bytes came before it.
// Thread-compatible: one source per thread.
#ifndef PSTRAIN_DATA_BYTE_SOURCE_H_
#define PSTRAIN_DATA_BYTE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

enum class Compression { kNone, kGzip };

// "" or "NONE": none; "GZIP": GZIP (tf.data's compression_type). Anything
// else: InvalidArgument naming it.
absl::StatusOr<Compression> ParseCompression(absl::string_view name);
// GZIP for a path ending in ".gz", else none.
Compression CompressionForPath(absl::string_view path);

class ByteSource {
 public:
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path,
                                                          Compression compression);
  ~ByteSource();

  // Up to `n` bytes into `out`: all n unless the file ends first (then
  // what was left; 0 at the end).
  absl::StatusOr<int64_t> Read(char* out, int64_t n);
  // Passes over up to `n` bytes without handing them out (a plain file's
  // are seeked over when more than kSeekBytes); returns how many the file
  // held (a plain file's as large as it was at Open).
  absl::StatusOr<int64_t> Skip(int64_t n);
  static constexpr int64_t kSeekBytes = int64_t{1} << 16;
  // Uncompressed bytes read or skipped so far.
  int64_t position() const { return position_; }
  const std::string& path() const { return path_; }

 private:
  struct Handle;
  ByteSource(std::string path, std::unique_ptr<Handle> handle);

  const std::string path_;
  std::unique_ptr<Handle> handle_;
  int64_t position_ = 0;
  std::string scratch_;  // Skip's sink for compressed data
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_BYTE_SOURCE_H_
