// SplitMix64: a statistically sound 64-bit generator of one add and a few
// multiplies per draw, whose stream is fixed by its state alone (unlike the
// standard library's distributions, which differ between implementations).
#ifndef PSTRAIN_BASE_SPLITMIX64_H_
#define PSTRAIN_BASE_SPLITMIX64_H_

#include <cstdint>

namespace pstrain {

// The next 64 random bits; advances `*state`.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_SPLITMIX64_H_
