#include "base/bfloat16.h"

#include <algorithm>

#include "base/vector_clones.h"

#if defined(__x86_64__) && defined(__linux__) && !defined(PSTRAIN_NO_CLONES)
#include <immintrin.h>
#define PSTRAIN_BFLOAT16_AVX512 1
#endif

namespace pstrain {
namespace {

#ifdef PSTRAIN_BFLOAT16_AVX512
// Narrowing: one pass of 16 values per step, straight between the caller's
// bytes (no block copies), front to back so that `out` may be `in` (each
// step loads its 64 bytes, then stores 32 below the next step's). The
// same arithmetic as ToBfloat16, lane by lane.
__attribute__((target("avx512f"))) int64_t NarrowAvx512(const char* in, int64_t n, char* out) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_loadu_si512(in + 4 * i);
    const __m512i high = _mm512_srli_epi32(bits, 16);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(bits, bias), _mm512_and_si512(high, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), inf);
    const __m512i b = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_cvtepi32_epi16(b));
  }
  return i;  // values [i, n) are the caller's
}

// Widens `m` (a multiple of 16) bfloat16s from `b` (not overlapping `out`)
// into floats at `out`.
__attribute__((target("avx512f"))) void WidenAvx512(const uint16_t* b, int64_t m, char* out) {
  for (int64_t i = 0; i < m; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    _mm512_storeu_si512(out + 4 * i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
  }
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#endif

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
  int64_t done = 0;
#ifdef PSTRAIN_BFLOAT16_AVX512
  if (HasAvx512()) done = NarrowAvx512(src, n, dst);
#endif
  float f[kBlock];
  uint16_t b[kBlock];
  // Front to back: block j's output, bytes [2 kBlock j, 2 kBlock (j + 1)),
  // lies below block j+1's input.
  for (int64_t first = done; first < n; first += kBlock) {
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
  // the input of every block before it. Each block's input is copied out
  // first; then widened straight into place (AVX-512), or through `f`.
  for (int64_t first = (n - 1) / kBlock * kBlock; n > 0 && first >= 0; first -= kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    std::memcpy(b, src + 2 * first, 2 * m);
#ifdef PSTRAIN_BFLOAT16_AVX512
    if (HasAvx512() && m % 16 == 0) {
      WidenAvx512(b, m, dst + 4 * first);
      continue;
    }
#endif
    WidenBlock(b, m, f);
    std::memcpy(dst + 4 * first, f, 4 * m);
  }
}

}  // namespace pstrain
