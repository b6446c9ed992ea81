// bfloat16, the upper half of a float32 (sign, 8-bit exponent, 7-bit
// mantissa): the optional wire type of tensors in Exchange frames
// (FrameHeader.wire_dtype). The PS keeps and updates float32; only what
// crosses the wire is narrowed. Conversions round to nearest even, keep
// infinities, and keep NaNs NaN (quiet). Values are little-endian uint16s
// as they lie in memory.
#ifndef PSTRAIN_BASE_BFLOAT16_H_
#define PSTRAIN_BASE_BFLOAT16_H_

#include <cstdint>
#include <cstring>

namespace pstrain {

// The bfloat16 nearest to `f` (ties to even).
inline uint16_t ToBfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  // Branch-free, so that loops over arrays vectorise.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float FromBfloat16(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Converts `n` floats at `in` to bfloat16s at `out`. `out` may be `in`
// itself (the bfloat16s then fill the first half of its bytes); otherwise
// the two must not overlap. Neither needs any alignment.
void FloatsToBfloat16(const void* in, int64_t n, void* out);

// Converts `n` bfloat16s at `in` to floats at `out`. `in` may be `out`
// itself (the bfloat16s in the first half of its bytes); otherwise the two
// must not overlap. Neither needs any alignment.
void Bfloat16ToFloats(const void* in, int64_t n, void* out);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_BFLOAT16_H_
