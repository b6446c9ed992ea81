// Finding NaN and Inf in raw float32 data quickly: the exponent bits are
// tested with integer operations, which vectorise (std::isfinite with an
// early exit does not), and the exact position is looked for only once a
// block is known to hold one.
#ifndef PSTRAIN_COMMON_FINITE_H_
#define PSTRAIN_COMMON_FINITE_H_

#include <cstdint>
#include <cstring>

namespace pstrain {

// Index of the first NaN or Inf among the `n` floats at `data` (any
// alignment: the bytes of a received message), or -1.
inline int64_t FirstNonFinite(const void* data, int64_t n) {
  const char* p = static_cast<const char*>(data);
  constexpr uint32_t kExponent = 0x7f800000u;  // all set: NaN or Inf
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    any |= (bits & kExponent) == kExponent ? 1u : 0u;
  }
  if (any == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    if ((bits & kExponent) == kExponent) return i;
  }
  return -1;
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FINITE_H_
