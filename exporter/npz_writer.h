// NumPy's .npz: a ZIP archive (entries stored, not compressed) of .npy
// files, one float32 array each, as numpy.savez writes and numpy.load
// reads. Format: NPY 1.0 (numpy.lib.format) in ZIP (PKWARE APPNOTE 6.3)
// without ZIP64: the archive must stay under 4 GiB.
#ifndef PSTRAIN_EXPORTER_NPZ_WRITER_H_
#define PSTRAIN_EXPORTER_NPZ_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

struct NpzArray {
  std::string name;            // the key numpy.load gives it
  std::vector<int64_t> shape;  // C order
  std::vector<float> values;   // product(shape) of them
};

// The bytes of one .npy file holding `a` (little-endian float32).
std::string NpyBytes(const NpzArray& a);

// The .npz archive of `arrays`, in order. InvalidArgument when an array's
// values do not match its shape, or the archive would pass 4 GiB.
absl::StatusOr<std::string> NpzBytes(const std::vector<NpzArray>& arrays);

}  // namespace pstrain

#endif  // PSTRAIN_EXPORTER_NPZ_WRITER_H_
