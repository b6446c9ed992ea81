// Element-wise loops over float32 arrays on the paths that sum and scale
// whole models (the all-reduce ring's reduction, the collective store's
// averaging) and widen a batch's pixel bytes (data/dataset.h). Compiled
// out of line with the hot loops' options for each instruction set
// (base/vector_clones.h): their callers' packages build at -O2, where g++
// 12 leaves such loops scalar (it then vectorises no loop that needs a
// run-time overlap check or a scalar tail).
//
// Each element is one IEEE operation on its own, as the plain loop does
// it, so the results are the same bits on every instruction set: the
// ring's fixed reduction order is kept, and a batch's floats are those a
// float copy of the pixels would hold.
#ifndef PSTRAIN_BASE_FLOAT_OPS_H_
#define PSTRAIN_BASE_FLOAT_OPS_H_

#include <cstdint>

namespace pstrain {

// dst[i] += src[i] for i in [0, n). The arrays must not overlap.
void AddFloats(float* dst, const float* src, int64_t n);

// dst[i] += the float of bfloat16 src[i] (base/bfloat16.h). The arrays
// must not overlap.
void AddBfloat16s(float* dst, const uint16_t* src, int64_t n);

// out[i] = in[i] * scale for i in [0, n). `out` may be `in`; otherwise the
// arrays must not overlap.
void ScaleFloats(const float* in, int64_t n, float scale, float* out);

// out[i] = float(in[i]) * scale for i in [0, n): bytes widened, as
// `in[i] * scale` is in a plain loop. The arrays must not overlap.
void BytesToFloats(const uint8_t* in, int64_t n, float scale, float* out);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_FLOAT_OPS_H_
