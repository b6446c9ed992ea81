// The per-element arithmetic of the CUDA layers (model/cuda_net_kernels.cu),
// written once for the device and the host: each kernel there is one of
// these functions over a grid, and model/cuda_layer_math_test.cc runs the
// same functions on the CPU against model/layers.h, so their index
// arithmetic is checked on machines without a GPU. No Abseil or other
// library headers: nvcc compiles this.
//
// Tensors are row-major and channels-last, as in model/layers.h: an
// example of a convolution or pool is [h, w, c] (1D: h = 1), its output
// [oh, ow, f] (pools: f = c). "Over the batch" indices count examples too:
// element t of a batch of examples of `size` floats is example t / size.
#ifndef PSTRAIN_MODEL_CUDA_LAYER_MATH_H_
#define PSTRAIN_MODEL_CUDA_LAYER_MATH_H_

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define PSTRAIN_HOST_DEVICE __host__ __device__ inline
#else
#define PSTRAIN_HOST_DEVICE inline
#endif

// A convolution's or pool's window over its input, as model/layers.h
// computes it (Keras's "same" padding: the odd one after).
struct PstrainWindow {
  int64_t h, w, c;         // the input
  int64_t oh, ow;          // output positions
  int32_t kh, kw, sh, sw;  // window and stride
  int64_t pad_top, pad_left;
};

namespace pstrain::cuda_math {

// Floats in one patch row: kh * kw * c.
PSTRAIN_HOST_DEVICE int64_t PatchSize(const PstrainWindow& g) {
  return static_cast<int64_t>(g.kh) * g.kw * g.c;
}

// Element (row, q) of the patch matrix of a batch: row = (e * oh + oy) * ow
// + ox, q = (i * kw + j) * c + ch; the input under kernel tap (i, j) at
// output position (oy, ox) of example e, 0 over the padding.
PSTRAIN_HOST_DEVICE float Im2ColAt(const PstrainWindow& g, const float* in, int64_t in_size,
                                   int64_t row, int64_t q) {
  const int64_t positions = g.oh * g.ow;
  const int64_t e = row / positions, p = row % positions;
  const int64_t oy = p / g.ow, ox = p % g.ow;
  const int64_t ch = q % g.c, tap = q / g.c;
  const int64_t i = tap / g.kw, j = tap % g.kw;
  const int64_t y = oy * g.sh - g.pad_top + i, x = ox * g.sw - g.pad_left + j;
  if (y < 0 || y >= g.h || x < 0 || x >= g.w) return 0.0f;
  return in[e * in_size + (y * g.w + x) * g.c + ch];
}

// The input gradient at element t of a batch (t = e * in_size + (y * w + x)
// * c + ch) from the patch matrix's gradient: the sum over the patch
// entries Im2ColAt took from there.
PSTRAIN_HOST_DEVICE float Col2ImAt(const PstrainWindow& g, const float* d_cols, int64_t in_size,
                                   int64_t t) {
  const int64_t e = t / in_size, r = t % in_size;
  const int64_t ch = r % g.c, yx = r / g.c;
  const int64_t y = yx / g.w, x = yx % g.w;
  const int64_t patch = PatchSize(g);
  float sum = 0.0f;
  for (int32_t i = 0; i < g.kh; ++i) {
    const int64_t ny = y + g.pad_top - i;  // oy * sh
    if (ny < 0 || ny % g.sh != 0 || ny / g.sh >= g.oh) continue;
    const int64_t oy = ny / g.sh;
    for (int32_t j = 0; j < g.kw; ++j) {
      const int64_t nx = x + g.pad_left - j;
      if (nx < 0 || nx % g.sw != 0 || nx / g.sw >= g.ow) continue;
      const int64_t ox = nx / g.sw;
      sum += d_cols[((e * g.oh + oy) * g.ow + ox) * patch +
                    (static_cast<int64_t>(i) * g.kw + j) * g.c + ch];
    }
  }
  return sum;
}

// Output element o of a max pool over a batch (o = e * out_size + (oy * ow
// + ox) * c + ch): the window's maximum and where it lies in the example
// ((y * w + x) * c + ch); ties keep the first in (i, j) order, as the CPU's.
PSTRAIN_HOST_DEVICE void MaxPoolAt(const PstrainWindow& g, const float* in, int64_t in_size,
                                   int64_t out_size, int64_t o, float* value, int32_t* arg) {
  const int64_t e = o / out_size, r = o % out_size;
  const int64_t ch = r % g.c, p = r / g.c;
  const int64_t oy = p / g.ow, ox = p % g.ow;
  const float* x = in + e * in_size;
  bool first = true;
  float best = 0.0f;
  int32_t at = 0;
  for (int32_t i = 0; i < g.kh; ++i) {
    const int64_t y = oy * g.sh - g.pad_top + i;
    if (y < 0 || y >= g.h) continue;
    for (int32_t j = 0; j < g.kw; ++j) {
      const int64_t xx = ox * g.sw - g.pad_left + j;
      if (xx < 0 || xx >= g.w) continue;
      const int32_t idx = static_cast<int32_t>((y * g.w + xx) * g.c + ch);
      const float v = x[idx];
      if (first || v > best) {
        best = v;
        at = idx;
        first = false;
      }
    }
  }
  *value = best;
  *arg = at;
}

// A max pool's input gradient at element t of a batch: the output
// gradients of the windows whose maximum it was.
PSTRAIN_HOST_DEVICE float MaxPoolGradAt(const PstrainWindow& g, const int32_t* arg,
                                        const float* d_out, int64_t in_size, int64_t out_size,
                                        int64_t t) {
  const int64_t e = t / in_size, r = t % in_size;
  const int64_t ch = r % g.c, yx = r / g.c;
  const int64_t y = yx / g.w, x = yx % g.w;
  float sum = 0.0f;
  for (int32_t i = 0; i < g.kh; ++i) {
    const int64_t ny = y + g.pad_top - i;
    if (ny < 0 || ny % g.sh != 0 || ny / g.sh >= g.oh) continue;
    const int64_t oy = ny / g.sh;
    for (int32_t j = 0; j < g.kw; ++j) {
      const int64_t nx = x + g.pad_left - j;
      if (nx < 0 || nx % g.sw != 0 || nx / g.sw >= g.ow) continue;
      const int64_t o = e * out_size + (oy * g.ow + nx / g.sw) * g.c + ch;
      if (arg[o] == r) sum += d_out[o];
    }
  }
  return sum;
}

// Global average pooling of [t, c] examples: output element o = e * c + ch.
PSTRAIN_HOST_DEVICE float AveragePoolAt(const float* in, int64_t t, int64_t c, int64_t o) {
  const int64_t e = o / c, ch = o % c;
  const float* x = in + e * t * c;
  float sum = 0.0f;
  for (int64_t s = 0; s < t; ++s) sum += x[s * c + ch];
  return sum * (1.0f / static_cast<float>(t));
}

// Draw k (from 0) of SplitMix64 started at `seed` (base/splitmix64.h):
// its state after k + 1 steps is seed + (k + 1) * the golden gamma.
PSTRAIN_HOST_DEVICE uint64_t SplitMix64Draw(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The seed of layer `layer`'s dropout mask in a step whose seed is
// `step_seed` (Network::SetStepSeed): each layer its own stream.
PSTRAIN_HOST_DEVICE uint64_t LayerSeed(uint64_t step_seed, int64_t layer) {
  return step_seed * 0x9E3779B97F4A7C15ull +
         static_cast<uint64_t>(layer + 1) * 0xD1B54A32D192ED03ull;
}

// Inverted dropout's factor for element i of a step's batch, as the CPU's
// dropout draws it: 32 bits per element, two per draw (the low half first);
// kept (1 / (1 - rate)) when they are at least rate * 2^32, else 0.
PSTRAIN_HOST_DEVICE float DropoutScaleAt(uint64_t seed, int64_t i, uint64_t drop_below,
                                         float keep_scale) {
  const uint64_t r = SplitMix64Draw(seed, static_cast<uint64_t>(i) / 2);
  const uint64_t bits = (i % 2 == 0) ? (r & 0xFFFFFFFFull) : (r >> 32);
  return bits >= drop_below ? keep_scale : 0.0f;
}

// One example of the sigmoid cross-entropy over logit z and label y (0 or
// 1): loss max(z, 0) - z y + log(1 + exp(-|z|)), whether z > 0 matches the
// label, the positive probability, and (delta not null) the mean loss's
// gradient (p - y) * inv_batch.
PSTRAIN_HOST_DEVICE void SigmoidCrossEntropyAt(float z, int32_t y, float inv_batch, float* loss,
                                               int32_t* correct, float* p, float* delta) {
  *loss = fmaxf(z, 0.0f) - z * static_cast<float>(y) + log1pf(expf(-fabsf(z)));
  *correct = ((z > 0.0f) == (y == 1)) ? 1 : 0;
  *p = 1.0f / (1.0f + expf(-z));
  if (delta != nullptr) *delta = (*p - static_cast<float>(y)) * inv_batch;
}

// One example of the softmax cross-entropy over `classes` logits and label
// y: its loss, whether the (first) argmax is y, and (delta not null) the
// mean loss's gradient (softmax - onehot) * inv_batch.
PSTRAIN_HOST_DEVICE void SoftmaxCrossEntropyAt(const float* row, int32_t classes, int32_t y,
                                               float inv_batch, float* loss, int32_t* correct,
                                               float* delta) {
  int32_t argmax = 0;
  for (int32_t j = 1; j < classes; ++j) {
    if (row[j] > row[argmax]) argmax = j;
  }
  const float m = row[argmax];
  float sum = 0.0f;
  for (int32_t j = 0; j < classes; ++j) sum += expf(row[j] - m);
  const float inv = 1.0f / sum;
  *loss = -logf(fmaxf(expf(row[y] - m) * inv, 1e-30f));
  *correct = argmax == y ? 1 : 0;
  if (delta == nullptr) return;
  for (int32_t j = 0; j < classes; ++j) {
    delta[j] = (expf(row[j] - m) * inv - (j == y ? 1.0f : 0.0f)) * inv_batch;
  }
}

// A row-major product C[m x n] = op(A)[m x k] op(B)[k x n] as the
// column-major call (cuBLAS's, or cblas with CblasColMajor) that computes
// it: C^T = op(B)^T op(A)^T. Pass `first` (B) as the call's A and `second`
// (A) as its B.
struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 0, ld_second = 0, ldc = 0;
};

PSTRAIN_HOST_DEVICE ColumnMajorGemm RowMajorAsColumnMajor(bool trans_a, bool trans_b, int64_t m,
                                                          int64_t n, int64_t k) {
  ColumnMajorGemm c;
  c.trans_first = trans_b;
  c.trans_second = trans_a;
  c.m = n;
  c.n = m;
  c.k = k;
  c.ld_first = trans_b ? k : n;   // B's row length as stored
  c.ld_second = trans_a ? m : k;  // A's
  c.ldc = n;
  return c;
}

}  // namespace pstrain::cuda_math

#endif  // PSTRAIN_MODEL_CUDA_LAYER_MATH_H_
