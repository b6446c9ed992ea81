// The CUDA layers' per-element arithmetic (model/cuda_layer_math.h), run on
// the CPU over every element and checked against the CPU layers
// (model/layers.h) on odd shapes: what the GPU kernels compute, without a
// GPU.
#include "model/cuda_layer_math.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/layers.h"

namespace pstrain::model {
namespace {

using cuda_math::ColumnMajorGemm;
using cuda_math::RowMajorAsColumnMajor;

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

void ExpectNear(const std::vector<float>& want, const std::vector<float>& got,
                const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  float largest = 0;
  for (float v : want) largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.0f, largest)) << what << " at " << i;
  }
}

// C = op(A) op(B), row-major, through the column-major call the CUDA code
// makes (cblas's column-major sgemm has cuBLAS's contract).
void GemmAsOnTheDevice(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       const float* b, float beta, float* c) {
  const ColumnMajorGemm g = RowMajorAsColumnMajor(ta, tb, m, n, k);
  cblas_sgemm(CblasColMajor, g.trans_first ? CblasTrans : CblasNoTrans,
              g.trans_second ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, b, g.ld_first, a,
              g.ld_second, beta, c, g.ldc);
}

TEST(CudaLayerMathTest, RowMajorProductsMapToColumnMajorCallsForEveryTransposition) {
  const int64_t m = 5, n = 3, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
      // A is [m x k] or, transposed, stored [k x m]; B likewise.
      auto at = [&](int64_t i, int64_t p) { return ta ? a[p * m + i] : a[i * k + p]; };
      auto bt = [&](int64_t p, int64_t j) { return tb ? b[j * k + p] : b[p * n + j]; };
      std::vector<float> want(m * n, 0.0f), got(m * n, 0.0f);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t p = 0; p < k; ++p) want[i * n + j] += at(i, p) * bt(p, j);
        }
      }
      GemmAsOnTheDevice(ta, tb, m, n, k, a.data(), b.data(), 0.0f, got.data());
      ExpectNear(want, got, "trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb));
    }
  }
}

LayerSpec Conv(LayerKind kind, int filters, std::array<int, 2> window, std::array<int, 2> stride,
               bool same, bool relu) {
  LayerSpec s;
  s.kind = kind;
  s.name = "conv";
  s.units = filters;
  s.window = window;
  s.stride = stride;
  s.same_padding = same;
  s.relu = relu;
  return s;
}

// Forward and backward of a convolution as the CUDA layer runs it: im2col,
// one product, bias and ReLU; then the ReLU's mask, the bias's column sums,
// two products and col2im.
void CheckConvolution(const LayerSpec& spec, const Shape& in_shape, int batch) {
  SCOPED_TRACE(std::string(LayerKindName(spec.kind)) + " on " + ShapeString(in_shape) +
               (spec.same_padding ? " same" : " valid"));
  ASSERT_TRUE(LayerOutputShape(spec, in_shape).ok());
  const std::vector<Shape> vars = LayerVariableShapes(spec, in_shape);
  const int64_t kernel = ShapeSize(vars[0]), f = spec.units;
  auto layer = Layer::Create(spec, in_shape, batch, 0, kernel);
  const int64_t in_size = layer->in_size(), out_size = layer->out_size();
  const std::vector<float> params = Random(kernel + f, 3, 0.5f);
  const std::vector<float> in = Random(batch * in_size, 4);
  std::vector<float> out(batch * out_size);
  layer->Forward(params.data(), in.data(), batch, true, out.data());

  const PstrainWindow g = LayerWindow(spec, in_shape);
  const int64_t patch = cuda_math::PatchSize(g), rows = batch * g.oh * g.ow;
  ASSERT_EQ(rows * f, batch * out_size);
  std::vector<float> cols(rows * patch);
  for (int64_t t = 0; t < rows * patch; ++t) {
    cols[t] = cuda_math::Im2ColAt(g, in.data(), in_size, t / patch, t % patch);
  }
  std::vector<float> got(rows * f);
  GemmAsOnTheDevice(false, false, rows, f, patch, cols.data(), params.data(), 0.0f, got.data());
  for (int64_t t = 0; t < rows * f; ++t) {
    got[t] += params[kernel + t % f];
    if (spec.relu) got[t] = std::max(got[t], 0.0f);
  }
  ExpectNear(out, got, "forward");

  const std::vector<float> d = Random(batch * out_size, 5);
  std::vector<float> d_cpu = d, grads(kernel + f, 0.0f), d_in(batch * in_size);
  layer->Backward(params.data(), in.data(), out.data(), d_cpu.data(), batch, grads.data(),
                  d_in.data());

  std::vector<float> dd = d;
  if (spec.relu) {
    for (int64_t t = 0; t < rows * f; ++t) dd[t] = out[t] > 0.0f ? dd[t] : 0.0f;
  }
  std::vector<float> g_got(kernel + f, 0.0f);
  for (int64_t t = 0; t < rows * f; ++t) g_got[kernel + t % f] += dd[t];
  GemmAsOnTheDevice(true, false, patch, f, rows, cols.data(), dd.data(), 0.0f, g_got.data());
  ExpectNear(grads, g_got, "kernel and bias gradients");
  std::vector<float> d_cols(rows * patch);
  GemmAsOnTheDevice(false, true, rows, patch, f, dd.data(), params.data(), 0.0f, d_cols.data());
  std::vector<float> d_in_got(batch * in_size);
  for (int64_t t = 0; t < batch * in_size; ++t) {
    d_in_got[t] = cuda_math::Col2ImAt(g, d_cols.data(), in_size, t);
  }
  ExpectNear(d_in, d_in_got, "input gradient");
}

TEST(CudaLayerMathTest, ConvolutionsMatchTheCpuLayers) {
  // Kernels longer than their stride, lengths the stride does not divide,
  // both paddings, several channels, with and without ReLU.
  CheckConvolution(Conv(LayerKind::kConv1D, 4, {1, 5}, {1, 1}, false, true), {17, 3}, 3);
  CheckConvolution(Conv(LayerKind::kConv1D, 3, {1, 4}, {1, 3}, true, false), {13, 2}, 2);
  CheckConvolution(Conv(LayerKind::kConv1D, 2, {1, 3}, {1, 2}, false, true), {10, 7}, 4);
  CheckConvolution(Conv(LayerKind::kConv2D, 5, {3, 3}, {1, 1}, false, true), {9, 7, 2}, 2);
  CheckConvolution(Conv(LayerKind::kConv2D, 3, {3, 2}, {2, 3}, true, true), {8, 11, 3}, 3);
  CheckConvolution(Conv(LayerKind::kConv2D, 2, {4, 4}, {3, 2}, true, false), {7, 6, 1}, 2);
}

void CheckMaxPool(const LayerSpec& spec, const Shape& in_shape, int batch, bool ties) {
  SCOPED_TRACE(std::string(LayerKindName(spec.kind)) + " on " + ShapeString(in_shape) +
               (spec.same_padding ? " same" : " valid") + (ties ? " with ties" : ""));
  ASSERT_TRUE(LayerOutputShape(spec, in_shape).ok());
  auto layer = Layer::Create(spec, in_shape, batch, -1, -1);
  const int64_t in_size = layer->in_size(), out_size = layer->out_size();
  std::vector<float> in = Random(batch * in_size, 6);
  // Few distinct values: windows with equal maxima, where the first wins.
  if (ties) {
    for (float& v : in) v = std::round(v * 2.0f);
  }
  std::vector<float> out(batch * out_size);
  layer->Forward(nullptr, in.data(), batch, true, out.data());
  const PstrainWindow g = LayerWindow(spec, in_shape);
  std::vector<float> got(batch * out_size);
  std::vector<int32_t> arg(batch * out_size);
  for (int64_t o = 0; o < batch * out_size; ++o) {
    cuda_math::MaxPoolAt(g, in.data(), in_size, out_size, o, &got[o], &arg[o]);
  }
  for (int64_t o = 0; o < batch * out_size; ++o) ASSERT_EQ(got[o], out[o]) << o;

  std::vector<float> d = Random(batch * out_size, 7), d_in(batch * in_size);
  layer->Backward(nullptr, in.data(), out.data(), d.data(), batch, nullptr, d_in.data());
  std::vector<float> d_in_got(batch * in_size);
  for (int64_t t = 0; t < batch * in_size; ++t) {
    d_in_got[t] = cuda_math::MaxPoolGradAt(g, arg.data(), d.data(), in_size, out_size, t);
  }
  ExpectNear(d_in, d_in_got, "input gradient");
}

// A pool: a window without filters or ReLU.
LayerSpec Pool(LayerKind kind, std::array<int, 2> window, std::array<int, 2> stride, bool same) {
  LayerSpec s = Conv(kind, 0, window, stride, same, false);
  s.name = "pool";
  return s;
}

TEST(CudaLayerMathTest, MaxPoolsMatchTheCpuLayersTiesIncluded) {
  for (bool ties : {false, true}) {
    CheckMaxPool(Pool(LayerKind::kMaxPool1D, {1, 2}, {1, 2}, false), {15, 3}, 3, ties);
    CheckMaxPool(Pool(LayerKind::kMaxPool1D, {1, 3}, {1, 2}, true), {10, 2}, 2, ties);
    CheckMaxPool(Pool(LayerKind::kMaxPool2D, {2, 2}, {2, 2}, false), {7, 9, 2}, 2, ties);
    CheckMaxPool(Pool(LayerKind::kMaxPool2D, {3, 3}, {2, 1}, true), {6, 5, 3}, 2, ties);
  }
}

TEST(CudaLayerMathTest, GlobalAveragePoolMatchesTheCpuLayer) {
  LayerSpec s;
  s.kind = LayerKind::kGlobalAveragePool1D;
  s.name = "gap";
  const Shape in_shape = {11, 5};
  const int batch = 3;
  auto layer = Layer::Create(s, in_shape, batch, -1, -1);
  const std::vector<float> in = Random(batch * 55, 8);
  std::vector<float> out(batch * 5);
  layer->Forward(nullptr, in.data(), batch, true, out.data());
  for (int64_t o = 0; o < batch * 5; ++o) {
    ASSERT_EQ(cuda_math::AveragePoolAt(in.data(), 11, 5, o), out[o]) << o;
  }
}

TEST(CudaLayerMathTest, DropoutDrawsTheCpuLayersMaskElementByElement) {
  LayerSpec s;
  s.kind = LayerKind::kDropout;
  s.name = "dropout";
  s.rate = 0.3f;
  const Shape in_shape = {37};  // odd: the last draw's high half unused
  const int batch = 5;
  auto layer = Layer::Create(s, in_shape, batch, -1, -1);
  const uint64_t seed = 0x1234'5678'9abc'def0ull;
  layer->SetSeed(seed);
  const std::vector<float> in = Random(batch * 37, 9);
  std::vector<float> out(batch * 37);
  layer->Forward(nullptr, in.data(), batch, true, out.data());
  const uint64_t drop_below = static_cast<uint64_t>(static_cast<double>(s.rate) * 4294967296.0);
  const float keep = 1.0f / (1.0f - s.rate);
  int dropped = 0;
  for (int64_t i = 0; i < batch * 37; ++i) {
    const float scale = cuda_math::DropoutScaleAt(seed, i, drop_below, keep);
    ASSERT_EQ(in[i] * scale, out[i]) << i;
    dropped += scale == 0.0f;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, batch * 37);
}

TEST(CudaLayerMathTest, LossesMatchTheirClosedForms) {
  const float inv_batch = 0.25f;
  for (float z : {-40.0f, -3.5f, -0.2f, 0.0f, 0.7f, 6.0f, 40.0f}) {
    for (int32_t y : {0, 1}) {
      float loss = 0, p = 0, delta = 0;
      int32_t correct = 0;
      cuda_math::SigmoidCrossEntropyAt(z, y, inv_batch, &loss, &correct, &p, &delta);
      const double pd = 1.0 / (1.0 + std::exp(-static_cast<double>(z)));
      // -log(sigmoid(z)) for y = 1, -log(1 - sigmoid(z)) for y = 0, in a
      // form that holds at |z| = 40.
      const double want = std::max<double>(z, 0) - z * y + std::log1p(std::exp(-std::fabs(z)));
      EXPECT_NEAR(loss, want, 1e-5 * std::max(1.0, want)) << z << " " << y;
      EXPECT_NEAR(p, pd, 1e-6) << z;
      EXPECT_NEAR(delta, (pd - y) * inv_batch, 1e-6) << z;
      EXPECT_EQ(correct, (z > 0) == (y == 1) ? 1 : 0) << z << " " << y;
    }
  }
  const std::vector<float> row = {0.5f, -1.0f, 2.0f, 2.0f, 0.0f};
  for (int32_t y = 0; y < 5; ++y) {
    float loss = 0;
    int32_t correct = 0;
    std::vector<float> delta(5);
    cuda_math::SoftmaxCrossEntropyAt(row.data(), 5, y, inv_batch, &loss, &correct, delta.data());
    double sum = 0;
    for (float v : row) sum += std::exp(static_cast<double>(v));
    EXPECT_NEAR(loss, -(row[y] - std::log(sum)), 1e-5) << y;
    EXPECT_EQ(correct, y == 2 ? 1 : 0) << "ties go to the first maximum";
    for (int j = 0; j < 5; ++j) {
      EXPECT_NEAR(delta[j], (std::exp(row[j]) / sum - (j == y)) * inv_batch, 1e-6) << y << j;
    }
  }
}

}  // namespace
}  // namespace pstrain::model
