// Finding NaN and Inf in raw float32 data quickly: the exponent bits are
// tested with integer operations, which vectorise (std::isfinite with an
// early exit does not), and the exact position is looked for only once a
// block is known to hold one.
#ifndef PSTRAIN_BASE_FINITE_H_
#define PSTRAIN_BASE_FINITE_H_

#include <cstdint>
#include <cstring>

namespace pstrain {

inline constexpr uint32_t kFloatExponentBits = 0x7f800000u;  // all set: NaN or Inf

// Whether any of the `n` floats at `data` (any alignment: the bytes of a
// received message) is NaN or Inf, without an early exit.
inline bool AnyNonFinite(const void* data, int64_t n) {
  const char* p = static_cast<const char*>(data);
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    any |= (bits & kFloatExponentBits) == kFloatExponentBits ? 1u : 0u;
  }
  return any != 0;
}

// Index of the first NaN or Inf among the `n` floats at `data` (any
// alignment), or -1.
inline int64_t FirstNonFinite(const void* data, int64_t n) {
  if (!AnyNonFinite(data, n)) return -1;
  const char* p = static_cast<const char*>(data);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    if ((bits & kFloatExponentBits) == kFloatExponentBits) return i;
  }
  return -1;
}

// FirstNonFinite compiled out of line with the hot loops' options and for
// each instruction set (base/vector_clones.h): for callers whose own
// package is built without them (at -O2, g++ leaves the inline loops above
// scalar: 4 MiB took about 1 ms on a worker).
int64_t FindNonFinite(const void* data, int64_t n);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_FINITE_H_
