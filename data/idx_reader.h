// Reads IDX files (the MNIST format: big-endian magic 0x000008TT with type TT
// and rank R, then R big-endian uint32 dimensions, then the data), gzip
// compressed or plain. Only unsigned-byte data (type 0x08) is accepted, which
// is what MNIST and Fashion-MNIST use. Stateless; thread-safe.
#ifndef PSTRAIN_DATA_IDX_READER_H_
#define PSTRAIN_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // product(dims) bytes, row-major
};

// Reads `path`. NotFound when the file cannot be opened; DataLoss, naming the
// file, for a bad magic number, a data type other than unsigned byte, a rank
// outside 1..4, a zero dimension, a file shorter than its header promises, or
// trailing bytes after the data.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// The dimensions `path`'s header states, reading nothing after it. Errors
// as ReadIdxFile's for the header.
absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path);

// Writes `array` (unsigned bytes; values.size() must be the product of dims)
// to `path` in IDX format, gzip-compressed when the path ends in ".gz",
// through "<path>.tmp" renamed into place, so a reader never sees half a
// file. InvalidArgument for a rank outside 1..4, a dimension outside
// 1..2^32-1 or a size that disagrees; Internal naming the file when it
// cannot be written.
absl::Status WriteIdxFile(const std::string& path, const IdxArray& array);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_IDX_READER_H_
