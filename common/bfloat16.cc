#include "common/bfloat16.h"

#include <algorithm>

#include "common/vector_clones.h"

namespace pstrain {
namespace {

// Conversions go through blocks on the stack, so that the loops over them
// vectorise and an in-place call never reads what it has written: a block's
// input is copied out before its output is stored.
constexpr int64_t kBlock = 1024;

PSTRAIN_VECTOR_CLONES
void NarrowBlock(const float* __restrict f, int64_t m, uint16_t* __restrict b) {
  for (int64_t i = 0; i < m; ++i) b[i] = ToBfloat16(f[i]);
}

PSTRAIN_VECTOR_CLONES
void WidenBlock(const uint16_t* __restrict b, int64_t m, float* __restrict f) {
  for (int64_t i = 0; i < m; ++i) f[i] = FromBfloat16(b[i]);
}

}  // namespace

void FloatsToBfloat16(const void* in, int64_t n, void* out) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  float f[kBlock];
  uint16_t b[kBlock];
  // Front to back: block j's output, bytes [2 kBlock j, 2 kBlock (j + 1)),
  // lies below block j+1's input.
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    std::memcpy(f, src + 4 * first, 4 * m);
    NarrowBlock(f, m, b);
    std::memcpy(dst + 2 * first, b, 2 * m);
  }
}

void Bfloat16ToFloats(const void* in, int64_t n, void* out) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  uint16_t b[kBlock];
  float f[kBlock];
  // Back to front: block j's output, from byte 4 kBlock j on, lies above
  // the input of every block before it.
  for (int64_t first = (n - 1) / kBlock * kBlock; n > 0 && first >= 0; first -= kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    std::memcpy(b, src + 2 * first, 2 * m);
    WidenBlock(b, m, f);
    std::memcpy(dst + 4 * first, f, 4 * m);
  }
}

}  // namespace pstrain
