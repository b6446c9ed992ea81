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

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_IDX_READER_H_
