#include "base/float_ops.h"

#include "base/bfloat16.h"
#include "base/vector_clones.h"

namespace pstrain {
namespace {

PSTRAIN_VECTOR_CLONES
void AddLoop(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

PSTRAIN_VECTOR_CLONES
void AddBfloat16Loop(float* __restrict dst, const uint16_t* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += FromBfloat16(src[i]);
}

PSTRAIN_VECTOR_CLONES
void ScaleLoop(const float* __restrict in, int64_t n, float scale, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale;
}

PSTRAIN_VECTOR_CLONES
void ScaleInPlaceLoop(float* data, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) data[i] *= scale;
}

PSTRAIN_VECTOR_CLONES
void BytesLoop(const uint8_t* __restrict in, int64_t n, float scale, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) * scale;
}

}  // namespace

void AddFloats(float* dst, const float* src, int64_t n) { AddLoop(dst, src, n); }

void AddBfloat16s(float* dst, const uint16_t* src, int64_t n) { AddBfloat16Loop(dst, src, n); }

void BytesToFloats(const uint8_t* in, int64_t n, float scale, float* out) {
  BytesLoop(in, n, scale, out);
}

void ScaleFloats(const float* in, int64_t n, float scale, float* out) {
  if (out == in) {
    ScaleInPlaceLoop(out, n, scale);
  } else {
    ScaleLoop(in, n, scale, out);
  }
}

}  // namespace pstrain
