#include "model/layers.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

using ::testing::HasSubstr;

LayerSpec Conv1D(int filters, int kernel, int stride, bool same, bool relu = false) {
  LayerSpec s;
  s.kind = LayerKind::kConv1D;
  s.name = "conv";
  s.units = filters;
  s.window = {1, kernel};
  s.stride = {1, stride};
  s.same_padding = same;
  s.relu = relu;
  return s;
}

LayerSpec Conv2D(int filters, int kh, int kw, int sh, int sw, bool same) {
  LayerSpec s;
  s.kind = LayerKind::kConv2D;
  s.name = "conv";
  s.units = filters;
  s.window = {kh, kw};
  s.stride = {sh, sw};
  s.same_padding = same;
  return s;
}

LayerSpec Pool(LayerKind kind, int ph, int pw, bool same = false) {
  LayerSpec s;
  s.kind = kind;
  s.name = "pool";
  s.window = {ph, pw};
  s.stride = {ph, pw};
  s.same_padding = same;
  return s;
}

LayerSpec Of(LayerKind kind) {
  LayerSpec s;
  s.kind = kind;
  s.name = LayerKindName(kind);
  return s;
}

// Everything a layer reads and writes over one batch, with a scalar loss
// L = sum(out * w) (in double) so that d_out = w.
struct Case {
  LayerSpec spec;
  Shape in;
  int batch = 2;
  bool spaced_inputs = false;  // distinct values 0.01 apart: no ties in a max
};

class GradientCheck {
 public:
  explicit GradientCheck(const Case& c) : c_(c) {
    out_shape_ = *LayerOutputShape(c.spec, c.in);
    const std::vector<Shape> vars = LayerVariableShapes(c.spec, c.in);
    int64_t n = 0;
    if (!vars.empty()) {
      kernel_at_ = 0;
      n = ShapeSize(vars[0]);
      if (vars.size() > 1) {  // a bias
        bias_at_ = n;
        n += ShapeSize(vars[1]);
      }
    }
    layer_ = Layer::Create(c.spec, c.in, c.batch, kernel_at_, bias_at_);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    params_.resize(n);
    for (float& p : params_) p = u(rng);
    x_.resize(c.batch * ShapeSize(c.in));
    if (c.spaced_inputs) {
      std::vector<int> order(x_.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i = 0; i < x_.size(); ++i) x_[i] = 0.01f * order[i] - 1.0f;
    } else {
      for (float& v : x_) v = u(rng);
    }
    w_.resize(c.batch * ShapeSize(out_shape_));
    for (float& v : w_) v = u(rng);
  }

  double Loss(const std::vector<float>& params, const std::vector<float>& x) {
    std::vector<float> out(w_.size());
    layer_->Forward(params.data(), x.data(), c_.batch, true, out.data());
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * w_[i];
    return l;
  }

  // Analytic gradients of the parameters and the input.
  void Analytic(std::vector<float>* grads, std::vector<float>* d_in) {
    std::vector<float> out(w_.size());
    layer_->Forward(params_.data(), x_.data(), c_.batch, true, out.data());
    std::vector<float> d_out = w_;
    grads->assign(params_.size(), 0.0f);
    d_in->assign(x_.size(), 0.0f);
    layer_->Backward(params_.data(), x_.data(), out.data(), d_out.data(), c_.batch, grads->data(),
                     d_in->data());
  }

  // Central differences against the analytic values, for every parameter
  // and input value.
  void Check(float eps = 1e-2f) {
    std::vector<float> grads, d_in;
    Analytic(&grads, &d_in);
    auto numeric = [&](std::vector<float>* v, size_t i) {
      const float keep = (*v)[i];
      (*v)[i] = keep + eps;
      const double up = Loss(params_, x_);
      (*v)[i] = keep - eps;
      const double down = Loss(params_, x_);
      (*v)[i] = keep;
      return (up - down) / (2.0 * eps);
    };
    for (size_t i = 0; i < params_.size(); ++i) {
      const double n = numeric(&params_, i);
      ASSERT_NEAR(grads[i], n, 2e-3 * std::max(1.0, std::abs(n))) << "parameter " << i;
    }
    for (size_t i = 0; i < x_.size(); ++i) {
      const double n = numeric(&x_, i);
      ASSERT_NEAR(d_in[i], n, 2e-3 * std::max(1.0, std::abs(n))) << "input " << i;
    }
  }

  Layer& layer() { return *layer_; }
  std::vector<float>& params() { return params_; }
  std::vector<float>& x() { return x_; }

 private:
  Case c_;
  Shape out_shape_;
  int64_t kernel_at_ = -1, bias_at_ = -1;
  std::unique_ptr<Layer> layer_;
  std::vector<float> params_, x_, w_;
};

TEST(LayersTest, OutputShapesAreKeras) {
  EXPECT_EQ(*LayerOutputShape(Conv1D(64, 5, 1, false), {300, 7}), (Shape{296, 64}));
  EXPECT_EQ(*LayerOutputShape(Conv1D(8, 4, 2, true), {7, 3}), (Shape{4, 8}));
  EXPECT_EQ(*LayerOutputShape(Pool(LayerKind::kMaxPool1D, 1, 2), {296, 64}), (Shape{148, 64}));
  EXPECT_EQ(*LayerOutputShape(Pool(LayerKind::kMaxPool1D, 1, 2), {5, 3}), (Shape{2, 3}));
  EXPECT_EQ(*LayerOutputShape(Pool(LayerKind::kMaxPool1D, 1, 2, true), {5, 3}), (Shape{3, 3}));
  EXPECT_EQ(*LayerOutputShape(Conv2D(32, 3, 3, 1, 1, false), {28, 28, 1}), (Shape{26, 26, 32}));
  EXPECT_EQ(*LayerOutputShape(Pool(LayerKind::kMaxPool2D, 2, 2), {26, 26, 32}),
            (Shape{13, 13, 32}));
  EXPECT_EQ(*LayerOutputShape(Of(LayerKind::kFlatten), {13, 13, 32}), (Shape{5408}));
  EXPECT_EQ(*LayerOutputShape(Of(LayerKind::kGlobalAveragePool1D), {73, 32}), (Shape{32}));
  // Keras's parameter counts: the seed's text CNN's convolutions.
  EXPECT_EQ(ShapeSize(LayerVariableShapes(Conv1D(64, 5, 1, false), {300, 7})[0]) + 64, 2304);
  EXPECT_EQ(ShapeSize(LayerVariableShapes(Conv1D(32, 3, 1, false), {148, 64})[0]) + 32, 6176);
  EXPECT_EQ(KerasShape({26, 26, 32}), "(None, 26, 26, 32)");
}

TEST(LayersTest, ShapesThatDoNotFitAreNamed) {
  EXPECT_THAT(LayerOutputShape(Conv1D(4, 5, 1, false), {3, 2}).status().message(),
              HasSubstr("conv1d kernel 5 is longer than a length of 3"));
  EXPECT_THAT(LayerOutputShape(Pool(LayerKind::kMaxPool1D, 1, 4), {3, 2}).status().message(),
              HasSubstr("max_pool1d pool 4 leaves zero length from a length of 3"));
  EXPECT_THAT(LayerOutputShape(Of(LayerKind::kFlatten), {784}).status().message(),
              HasSubstr("flatten has nothing to flatten: its input [784] is already flat"));
  LayerSpec dense;
  dense.units = 4;
  EXPECT_THAT(LayerOutputShape(dense, {26, 32}).status().message(),
              HasSubstr("dense needs a flat [N] input but its input is [26, 32]: put flatten"));
  EXPECT_THAT(LayerOutputShape(Conv2D(4, 3, 3, 1, 1, false), {784}).status().message(),
              HasSubstr("conv2d needs a [height, width, channels] input but its input is [784]: "
                        "give the model an input_shape"));
  EXPECT_THAT(
      LayerOutputShape(Conv2D(65536, 4096, 4096, 1, 1, true), {1, 1, 4096}).status().message(),
      HasSubstr("conv2d kernel of 4.5036e+15 values is larger than 2^31"));
  LayerSpec drop = Of(LayerKind::kDropout);
  drop.rate = 1;
  EXPECT_THAT(LayerOutputShape(drop, {4}).status().message(),
              HasSubstr("dropout rate 1 is not in [0, 1)"));
}

TEST(LayersTest, Conv1DComputesKerasValues) {
  // x = [1, 2, 3, 4] (one channel), kernel [1, 0, -1], bias 0.5.
  const LayerSpec spec = Conv1D(1, 3, 1, false);
  auto layer = Layer::Create(spec, {4, 1}, 1, 0, 3);
  const std::vector<float> params = {1, 0, -1, 0.5f};
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> out(2);
  layer->Forward(params.data(), x.data(), 1, false, out.data());
  EXPECT_EQ(out, (std::vector<float>{-1.5f, -1.5f}));
  // Same padding, stride 2: ceil(4 / 2) outputs, the one padding value
  // after the end (Keras puts the odd one there).
  auto same = Layer::Create(Conv1D(1, 3, 2, true), {4, 1}, 1, 0, 3);
  same->Forward(params.data(), x.data(), 1, false, out.data());
  EXPECT_EQ(out, (std::vector<float>{1 - 3 + 0.5f, 3 + 0.5f}));
}

TEST(LayersTest, Conv2DComputesKerasValues) {
  // A 2x3 single-channel image, a 2x2 kernel of two filters.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  // kernel [kh, kw, c, f]: filter 0 sums the window, filter 1 is its top-left.
  const std::vector<float> params = {1, 1, 1, 0, 1, 0, 1, 0, 0, 10};
  auto layer = Layer::Create(Conv2D(2, 2, 2, 1, 1, false), {2, 3, 1}, 1, 0, 8);
  std::vector<float> out(4);
  layer->Forward(params.data(), x.data(), 1, false, out.data());
  EXPECT_EQ(out, (std::vector<float>{12, 11, 16, 12}));
}

TEST(LayersTest, ConvolutionGradientsMatchCentralDifferences) {
  for (const Case& c : std::vector<Case>{
           {Conv1D(3, 3, 2, false), {7, 2}},  // kernel longer than the stride, odd length
           {Conv1D(2, 4, 2, true), {6, 3}},   // same padding, even kernel (uneven pads)
           {Conv1D(2, 5, 1, true), {3, 1}},   // kernel longer than the input under same
           {Conv2D(2, 3, 2, 2, 1, false), {5, 4, 2}},
           {Conv2D(3, 3, 3, 2, 2, true), {5, 5, 1}},
       }) {
    SCOPED_TRACE(LayerKindName(c.spec.kind) + std::string(" on ") + ShapeString(c.in));
    GradientCheck(c).Check();
  }
  // With ReLU: away from its kink at these points.
  LayerSpec relu = Conv1D(2, 3, 1, false, true);
  GradientCheck(Case{relu, {6, 2}}).Check(1e-3f);
}

TEST(LayersTest, PoolingAndReshapingGradientsMatchCentralDifferences) {
  for (const Case& c : std::vector<Case>{
           {Pool(LayerKind::kMaxPool1D, 1, 2), {5, 3}, 2, true},  // length not divisible
           {Pool(LayerKind::kMaxPool1D, 1, 3, true), {7, 2}, 2, true},
           {Pool(LayerKind::kMaxPool2D, 2, 2), {5, 5, 2}, 2, true},
           {Pool(LayerKind::kMaxPool2D, 3, 2, true), {4, 5, 1}, 2, true},
           {Of(LayerKind::kGlobalAveragePool1D), {5, 3}},
           {Of(LayerKind::kFlatten), {3, 4, 2}},
       }) {
    SCOPED_TRACE(LayerKindName(c.spec.kind) + std::string(" on ") + ShapeString(c.in));
    GradientCheck(c).Check(1e-3f);
  }
  LayerSpec dense;
  dense.name = "dense";
  dense.units = 3;
  dense.relu = true;
  GradientCheck(Case{dense, {5}, 3}).Check(1e-3f);
}

TEST(LayersTest, ConvolutionInSeveralPatchChunksEqualsOneExampleAtATime) {
  // The reference's im2col (oneDNN has no patch buffer): 4,081 positions x
  // 1,024 floats per example, more than the 16 MiB patch buffer holds, so
  // each example is its own chunk.
  SetCpuKernels(CpuKernels::kReference);
  const LayerSpec spec = Conv1D(8, 16, 1, false);
  const Shape in = {4096, 64};
  const int batch = 3;
  auto whole = Layer::Create(spec, in, batch, 0, 16 * 64 * 8);
  auto single = Layer::Create(spec, in, 1, 0, 16 * 64 * 8);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> params(16 * 64 * 8 + 8), x(batch * ShapeSize(in));
  for (float& v : params) v = u(rng);
  for (float& v : x) v = u(rng);
  const int64_t out_size = ShapeSize(*LayerOutputShape(spec, in));
  std::vector<float> out(batch * out_size), d_out(out.size());
  for (float& v : d_out) v = u(rng);
  std::vector<float> grads(params.size()), d_in(x.size());
  whole->Forward(params.data(), x.data(), batch, true, out.data());
  std::vector<float> d = d_out;
  whole->Backward(params.data(), x.data(), out.data(), d.data(), batch, grads.data(), d_in.data());
  std::vector<double> summed(params.size(), 0.0);
  for (int e = 0; e < batch; ++e) {
    std::vector<float> o(out_size), g(params.size()), di(ShapeSize(in));
    single->Forward(params.data(), x.data() + e * ShapeSize(in), 1, true, o.data());
    for (int64_t i = 0; i < out_size; ++i) ASSERT_FLOAT_EQ(o[i], out[e * out_size + i]);
    std::vector<float> de(d_out.begin() + e * out_size, d_out.begin() + (e + 1) * out_size);
    single->Backward(params.data(), x.data() + e * ShapeSize(in), o.data(), de.data(), 1, g.data(),
                     di.data());
    for (size_t i = 0; i < g.size(); ++i) summed[i] += g[i];
    for (int64_t i = 0; i < ShapeSize(in); ++i) {
      ASSERT_FLOAT_EQ(di[i], d_in[e * ShapeSize(in) + i]);
    }
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_NEAR(grads[i], summed[i], 1e-3 * std::max(1.0, std::abs(summed[i])));
  }
  SetCpuKernels(CpuKernels::kOneDnn);
}

TEST(LayersTest, DropoutIsSeededScaledAndOffOutsideTraining) {
  LayerSpec spec = Of(LayerKind::kDropout);
  spec.rate = 0.25f;
  const int n = 4000;
  auto layer = Layer::Create(spec, {n}, 1, -1, -1);
  std::vector<float> x(n, 2.0f), a(n), b(n), c(n);
  layer->SetSeed(11);
  layer->Forward(nullptr, x.data(), 1, true, a.data());
  layer->SetSeed(11);
  layer->Forward(nullptr, x.data(), 1, true, b.data());
  EXPECT_EQ(a, b) << "one seed, one mask";
  layer->SetSeed(12);
  layer->Forward(nullptr, x.data(), 1, true, c.data());
  EXPECT_NE(a, c);
  const int dropped = static_cast<int>(std::count(a.begin(), a.end(), 0.0f));
  EXPECT_NEAR(dropped, n / 4, 100);  // 4 standard deviations
  for (float v : a) EXPECT_TRUE(v == 0.0f || v == 2.0f / 0.75f) << v;
  // The gradient flows where the value was kept, scaled alike.
  std::vector<float> d_out(n, 1.0f), d_in(n);
  layer->SetSeed(11);
  layer->Forward(nullptr, x.data(), 1, true, a.data());
  layer->Backward(nullptr, x.data(), a.data(), d_out.data(), 1, nullptr, d_in.data());
  for (int i = 0; i < n; ++i) EXPECT_EQ(d_in[i], a[i] / 2.0f);
  layer->Forward(nullptr, x.data(), 1, false, c.data());
  EXPECT_EQ(c, x) << "identity outside training";
}

// The layers of image models beyond convolution and max pooling
// (model/image_layers.h) and every Keras activation on a dense layer and
// a convolution.
TEST(LayersTest, ImageLayersAndActivationsGradientsMatchCentralDifferences) {
  LayerSpec pad = Of(LayerKind::kZeroPadding2D);
  pad.padding = {1, 2, 0, 1};
  LayerSpec relu6 = Of(LayerKind::kReLU);
  relu6.activation = Activation::kRelu6;
  LayerSpec rescaling = Of(LayerKind::kRescaling);
  rescaling.rescale = 1.0f / 127.5f;
  rescaling.offset = -1.0f;
  std::vector<Case> cases = {
      {rescaling, {3, 2, 2}},
      {Of(LayerKind::kGlobalAveragePool2D), {3, 4, 2}},
      {Of(LayerKind::kGlobalMaxPool2D), {3, 4, 2}, 2, true},
      {Pool(LayerKind::kAveragePool2D, 2, 2), {5, 4, 2}},
      {Pool(LayerKind::kAveragePool2D, 3, 3, true), {4, 5, 2}},
      {pad, {2, 3, 2}},
      {relu6, {3, 4}, 2, true},
  };
  for (Activation a : {Activation::kRelu6, Activation::kSigmoid, Activation::kTanh,
                       Activation::kElu, Activation::kSelu, Activation::kGelu,
                       Activation::kSwish}) {
    LayerSpec act = Of(LayerKind::kActivation);
    act.activation = a;
    cases.push_back({act, {7}, 2, true});
    LayerSpec dense;
    dense.name = "dense";
    dense.units = 3;
    dense.activation = a;
    cases.push_back({dense, {4}, 3});
    LayerSpec conv = Conv2D(2, 3, 3, 1, 1, true);
    conv.activation = a;
    cases.push_back({conv, {4, 3, 2}});
  }
  // Depthwise convolutions (one kernel per channel, or two), with and
  // without a bias; a convolution and a dense layer without one.
  for (int m : {1, 2}) {
    for (bool same : {false, true}) {
      LayerSpec dw = Conv2D(0, 3, 3, 2, 1, same);
      dw.kind = LayerKind::kDepthwiseConv2D;
      dw.depth_multiplier = m;
      dw.use_bias = m == 1;
      dw.activation = same ? Activation::kSwish : Activation::kLinear;  // smooth: no kink
      cases.push_back({dw, {5, 4, 3}});
    }
  }
  LayerSpec conv = Conv2D(3, 3, 3, 1, 1, true);
  conv.use_bias = false;
  conv.relu = true;
  cases.push_back({conv, {4, 4, 2}});
  LayerSpec dense;
  dense.name = "dense";
  dense.units = 3;
  dense.use_bias = false;
  cases.push_back({dense, {5}, 3});
  for (const Case& c : cases) {
    SCOPED_TRACE(LayerKindName(c.spec.kind) + std::string(" ") +
                 ActivationName(c.spec.activation) + " on " + ShapeString(c.in));
    GradientCheck(c).Check(1e-3f);
  }
}

// A depthwise convolution is one convolution per channel: channel c's
// output j is the 2D convolution of input channel c with kernel [:, :, c, j].
TEST(LayersTest, ADepthwiseConvolutionConvolvesEachChannelAlone) {
  LayerSpec dw = Conv2D(0, 2, 2, 1, 1, false);
  dw.kind = LayerKind::kDepthwiseConv2D;
  dw.depth_multiplier = 2;
  ASSERT_OK_AND_ASSIGN(Shape out, LayerOutputShape(dw, {3, 3, 2}));
  EXPECT_EQ(out, (Shape{2, 2, 4}));
  EXPECT_EQ(LayerVariableShapes(dw, {3, 3, 2}), (std::vector<Shape>{{2, 2, 2, 2}, {4}}));
  // Input channel 0 holds 0..8, channel 1 ten times that; kernel taps
  // [i, j, c, m] = (c + 1) * (m + 1) at the top left only; bias 0.5 each.
  std::vector<float> x(18);
  for (int p = 0; p < 9; ++p) {
    x[p * 2] = static_cast<float>(p);
    x[p * 2 + 1] = 10.0f * p;
  }
  std::vector<float> params(16 + 4, 0.0f);
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 2; ++m) params[c * 2 + m] = static_cast<float>((c + 1) * (m + 1));
  for (int j = 0; j < 4; ++j) params[16 + j] = 0.5f;
  auto layer = Layer::Create(dw, {3, 3, 2}, 1, 0, 16);
  std::vector<float> y(16);
  layer->Forward(params.data(), x.data(), 1, false, y.data());
  // Position (0, 1) reads input (0, 1): channel 0 is 1, channel 1 is 10.
  EXPECT_EQ(std::vector<float>(y.begin() + 4, y.begin() + 8),
            (std::vector<float>{1 * 1 + 0.5f, 1 * 2 + 0.5f, 10 * 2 + 0.5f, 10 * 4 + 0.5f}));
}

TEST(LayersTest, ImageLayersComputeKerasValues) {
  // Rescaling(1/127.5, offset=-1): pixels 0..255 to [-1, 1], MobileNetV2's.
  LayerSpec rescaling = Of(LayerKind::kRescaling);
  rescaling.rescale = 1.0f / 127.5f;
  rescaling.offset = -1.0f;
  const std::vector<float> pixels = {0, 127.5f, 255};
  std::vector<float> scaled(3);
  Layer::Create(rescaling, {3}, 1, -1, -1)->Forward(nullptr, pixels.data(), 1, true,
                                                     scaled.data());
  EXPECT_EQ(scaled, (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(*LayerOutputShape(Of(LayerKind::kGlobalAveragePool2D), {7, 7, 5}), (Shape{5}));
  EXPECT_EQ(*LayerOutputShape(Pool(LayerKind::kAveragePool2D, 2, 2), {7, 7, 5}),
            (Shape{3, 3, 5}));
  LayerSpec pad = Of(LayerKind::kZeroPadding2D);
  pad.padding = {0, 1, 0, 1};  // Keras's correct_pad for a stride-2 224x224 convolution
  EXPECT_EQ(*LayerOutputShape(pad, {224, 224, 3}), (Shape{225, 225, 3}));
  EXPECT_EQ(std::string(LayerOutputShape(pad, {4, 3}).status().message()),
            "zero_padding2d needs a [height, width, channels] input but its input is [4, 3]");
  LayerSpec softmax = Of(LayerKind::kActivation);
  softmax.activation = Activation::kSoftmax;
  EXPECT_EQ(std::string(LayerOutputShape(softmax, {4}).status().message()),
            "activation softmax is the last dense layer's only (the loss takes its logits)");

  // Average pooling with "same" padding divides by the cells inside the
  // input: a 3x3 window at a corner of 2x2 ones averages four ones.
  LayerSpec avg = Pool(LayerKind::kAveragePool2D, 3, 3, true);
  avg.stride = {1, 1};
  auto layer = Layer::Create(avg, {2, 2, 1}, 1, -1, -1);
  std::vector<float> x = {1, 2, 3, 4}, out(4);
  layer->Forward(nullptr, x.data(), 1, false, out.data());
  EXPECT_EQ(out, (std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f}));
  // Zero padding puts the input where its top and left padding leave it.
  pad.padding = {1, 0, 0, 1};
  layer = Layer::Create(pad, {1, 2, 1}, 1, -1, -1);
  std::vector<float> padded(2 * 3);
  layer->Forward(nullptr, x.data(), 1, false, padded.data());
  EXPECT_EQ(padded, (std::vector<float>{0, 0, 0, 1, 2, 0}));
  // The global max's gradient goes to where the maximum was.
  layer = Layer::Create(Of(LayerKind::kGlobalMaxPool2D), {2, 2, 1}, 1, -1, -1);
  std::vector<float> m(1), d_out = {5}, d_in(4);
  layer->Forward(nullptr, x.data(), 1, true, m.data());
  EXPECT_EQ(m[0], 4);
  layer->Backward(nullptr, x.data(), m.data(), d_out.data(), 1, nullptr, d_in.data());
  EXPECT_EQ(d_in, (std::vector<float>{0, 0, 0, 5}));
}

}  // namespace
}  // namespace pstrain::model
