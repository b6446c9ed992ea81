// Reading a protobuf-style base-128 varint out of a byte buffer of any
// size (protobuf's own readers stop at 2 GiB).
#ifndef PSTRAIN_BASE_VARINT_H_
#define PSTRAIN_BASE_VARINT_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace pstrain {

// The varint at bytes[*at...] into *v, *at moved past it; false when it
// runs past the end or over 10 bytes.
inline bool ReadVarint(absl::string_view bytes, size_t* at, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(bytes[(*at)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_VARINT_H_
