#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/layers.h"
#include "model/onednn_conv.h"
#include "model/onednn_eltwise.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

struct Case {
  LayerKind kind;
  Shape in;
  int units;  // filters; depthwise: the depth multiplier
  std::array<int, 2> window, stride;
  bool same = false;
  bool bias = true;
  bool relu = false;
  Activation activation = Activation::kLinear;
};

LayerSpec SpecOf(const Case& c) {
  LayerSpec s;
  s.kind = c.kind;
  s.name = "conv";
  if (c.kind == LayerKind::kDepthwiseConv2D) {
    s.depth_multiplier = c.units;
  } else {
    s.units = c.units;
  }
  s.window = c.window;
  s.stride = c.stride;
  s.same_padding = c.same;
  s.use_bias = c.bias;
  s.relu = c.relu;
  s.activation = c.activation;
  return s;
}

std::string Describe(const Case& c) {
  return std::string(LayerKindName(c.kind)) + " on " + ShapeString(c.in) + " window " +
         std::to_string(c.window[0]) + "x" + std::to_string(c.window[1]) + " stride " +
         std::to_string(c.stride[0]) + "x" + std::to_string(c.stride[1]) +
         (c.same ? " same" : " valid") + (c.bias ? "" : " no bias") + (c.relu ? " relu" : "");
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-6;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (size_t i = 0; i < got.size(); ++i) {
    // Both sum the same products in different orders: float rounding alone.
    ASSERT_NEAR(got[i], want[i], 2e-5 * scale + 1e-6) << what << " " << i;
  }
}

// Forward and backward of both implementations over the same batch, at
// the largest batch and at a smaller one (a second set of primitives).
void Compare(const Case& c) {
  SCOPED_TRACE(Describe(c));
  const LayerSpec spec = SpecOf(c);
  const Shape out_shape = *LayerOutputShape(spec, c.in);
  const std::vector<Shape> vars = LayerVariableShapes(spec, c.in);
  const int64_t kernel_size = ShapeSize(vars[0]);
  const int64_t bias_at = c.bias ? kernel_size : -1;
  const int64_t n_params = kernel_size + (c.bias ? ShapeSize(vars[1]) : 0);
  const int max_batch = 3;
  std::unique_ptr<Layer> onednn =
      CreateOneDnnConvLayer(spec, c.in, out_shape, max_batch, 0, bias_at);
  ASSERT_NE(onednn, nullptr) << "oneDNN cannot build it";
  SetCpuKernels(CpuKernels::kReference);
  std::unique_ptr<Layer> reference = Layer::Create(spec, c.in, max_batch, 0, bias_at);
  SetCpuKernels(CpuKernels::kOneDnn);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> params(n_params);
  for (float& v : params) v = u(rng);
  for (int batch : {max_batch, 1}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<float> x(batch * ShapeSize(c.in)), d(batch * ShapeSize(out_shape));
    for (float& v : x) v = u(rng);
    for (float& v : d) v = u(rng);
    struct Result {
      std::vector<float> out, grads, d_in;
    };
    auto run = [&](Layer& layer) {
      Result r{std::vector<float>(d.size()), std::vector<float>(params.size(), 7.0f),
               std::vector<float>(x.size(), 7.0f)};  // 7: overwritten, not added to
      layer.Forward(params.data(), x.data(), batch, true, r.out.data());
      std::vector<float> d_out = d;
      layer.Backward(params.data(), x.data(), r.out.data(), d_out.data(), batch, r.grads.data(),
                     r.d_in.data());
      return r;
    };
    const Result want = run(*reference), got = run(*onednn);
    ExpectClose(got.out, want.out, "output");
    ExpectClose(got.grads, want.grads, "variable gradient");
    ExpectClose(got.d_in, want.d_in, "input gradient");
  }
}

TEST(OneDnnConvTest, Conv2DMatchesTheReference) {
  for (const Case& c : std::vector<Case>{
           {LayerKind::kConv2D, {8, 8, 3}, 5, {3, 3}, {1, 1}, true},
           {LayerKind::kConv2D, {9, 7, 4}, 6, {3, 3}, {2, 2}, true},    // odd: padding after
           {LayerKind::kConv2D, {8, 8, 4}, 6, {3, 3}, {2, 2}, true},    // even: padding after
           {LayerKind::kConv2D, {8, 9, 2}, 3, {3, 2}, {2, 2}, false},   // input left unread
           {LayerKind::kConv2D, {6, 6, 16}, 8, {1, 1}, {1, 1}, false},  // pointwise
           {LayerKind::kConv2D, {12, 12, 3}, 4, {7, 7}, {2, 2}, true, false},  // ResNet's stem
           {LayerKind::kConv2D, {5, 5, 3}, 4, {3, 3}, {1, 1}, false, true, true},
           {LayerKind::kConv2D,
            {5, 5, 3},
            4,
            {3, 3},
            {1, 1},
            true,
            false,
            false,
            Activation::kTanh},
       }) {
    Compare(c);
  }
}

TEST(OneDnnConvTest, Conv1DMatchesTheReference) {
  for (const Case& c : std::vector<Case>{
           {LayerKind::kConv1D, {20, 8}, 6, {1, 5}, {1, 1}, false, true, true},  // the text CNN's
           {LayerKind::kConv1D, {7, 2}, 3, {1, 3}, {1, 2}, false},
           {LayerKind::kConv1D, {6, 3}, 2, {1, 4}, {1, 2}, true},
       }) {
    Compare(c);
  }
}

TEST(OneDnnConvTest, DepthwiseMatchesTheReference) {
  for (const Case& c : std::vector<Case>{
           {LayerKind::kDepthwiseConv2D, {8, 8, 16}, 1, {3, 3}, {1, 1}, true, false},
           {LayerKind::kDepthwiseConv2D, {9, 9, 8}, 1, {3, 3}, {2, 2}, true, false},
           {LayerKind::kDepthwiseConv2D, {8, 8, 8}, 1, {3, 3}, {2, 2}, false, false},
           {LayerKind::kDepthwiseConv2D, {6, 6, 3}, 2, {3, 3}, {1, 1}, true},  // multiplier 2
           {LayerKind::kDepthwiseConv2D, {6, 6, 4}, 1, {3, 3}, {1, 1}, true, true, true},
       }) {
    Compare(c);
  }
}

TEST(OneDnnConvTest, LayersUseOneDnnUnlessTheReferenceIsAsked) {
  EXPECT_EQ(CpuKernelsInUse(), CpuKernels::kOneDnn);
  EXPECT_STREQ(CpuKernelsName(CpuKernels::kReference), "reference");
  OneDnnConvSpec spec;
  spec.window = PstrainWindow{8, 8, 16, 8, 8, 3, 3, 1, 1, 1, 1};
  spec.out_channels = 16;
  spec.groups = 16;
  auto conv = OneDnnConv::Create(spec, 4);
  ASSERT_TRUE(conv.ok()) << conv.status();
  // A jit implementation, not oneDNN's reference loops.
  EXPECT_EQ((*conv)->Implementations(4).find("ref"), std::string::npos)
      << (*conv)->Implementations(4);
}

TEST(OneDnnConvTest, GroupsThatDoNotDivideTheChannelsAreRefused) {
  OneDnnConvSpec spec;
  spec.window = PstrainWindow{8, 8, 6, 8, 8, 3, 3, 1, 1, 1, 1};
  spec.out_channels = 6;
  spec.groups = 4;
  auto conv = OneDnnConv::Create(spec, 2);
  EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(conv.status().message(), "groups 4 do not divide 6 input and 6 output channels");
}

// Pools against the reference, forward and backward, on inputs without
// ties (distinct values: the maximum's position is one).
TEST(OneDnnPoolTest, PoolsMatchTheReference) {
  struct PoolCase {
    LayerKind kind;
    Shape in;
    std::array<int, 2> window, stride;
    bool same;
  };
  for (const PoolCase& c : std::vector<PoolCase>{
           {LayerKind::kMaxPool2D, {8, 8, 4}, {2, 2}, {2, 2}, false},
           {LayerKind::kMaxPool2D, {9, 7, 3}, {3, 3}, {2, 2}, true},  // ResNet's, odd input
           {LayerKind::kMaxPool2D, {7, 7, 2}, {3, 2}, {1, 2}, false},
           {LayerKind::kMaxPool1D, {9, 3}, {1, 2}, {1, 2}, false},
           {LayerKind::kMaxPool1D, {7, 2}, {1, 3}, {1, 3}, true},
           {LayerKind::kAveragePool2D, {6, 6, 3}, {2, 2}, {1, 1}, true},  // edges: fewer cells
           {LayerKind::kAveragePool2D, {8, 8, 2}, {3, 3}, {2, 2}, false},
           {LayerKind::kGlobalAveragePool2D, {5, 4, 6}, {1, 1}, {1, 1}, false},
           {LayerKind::kGlobalMaxPool2D, {5, 4, 6}, {1, 1}, {1, 1}, false},
       }) {
    LayerSpec spec;
    spec.kind = c.kind;
    spec.name = "pool";
    spec.window = c.window;
    spec.stride = c.stride;
    spec.same_padding = c.same;
    SCOPED_TRACE(std::string(LayerKindName(c.kind)) + " on " + ShapeString(c.in));
    const Shape out = *LayerOutputShape(spec, c.in);
    const int batch = 3;
    std::unique_ptr<Layer> onednn = CreateOneDnnPoolLayer(spec, c.in, out, batch);
    ASSERT_NE(onednn, nullptr);
    EXPECT_TRUE(onednn->on_onednn());
    SetCpuKernels(CpuKernels::kReference);
    std::unique_ptr<Layer> reference = Layer::Create(spec, c.in, batch, -1, -1);
    SetCpuKernels(CpuKernels::kOneDnn);
    EXPECT_FALSE(reference->on_onednn());
    std::vector<float> x(batch * ShapeSize(c.in)), d(batch * ShapeSize(out));
    std::vector<int> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(9);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * order[i] - 1.0f;
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : d) v = u(rng);
    auto run = [&](Layer& layer, std::vector<float>* y, std::vector<float>* d_in) {
      y->assign(d.size(), 0.0f);
      d_in->assign(x.size(), 7.0f);  // overwritten, not added to
      layer.Forward(nullptr, x.data(), batch, true, y->data());
      std::vector<float> d_out = d;
      layer.Backward(nullptr, x.data(), y->data(), d_out.data(), batch, nullptr, d_in->data());
    };
    std::vector<float> want_y, want_d, got_y, got_d;
    run(*reference, &want_y, &want_d);
    run(*onednn, &got_y, &got_d);
    ExpectClose(got_y, want_y, "output");
    ExpectClose(got_d, want_d, "input gradient");
  }
}

// Every activation oneDNN computes, against the reference loops, over
// values that include the kinks (relu's 0, relu6's 0 and 6 exactly).
TEST(OneDnnEltwiseTest, ActivationsMatchTheReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8, 8);
  std::vector<float> z(1000);
  for (float& v : z) v = u(rng);
  z[0] = 0.0f;
  z[1] = 6.0f;
  z[2] = -0.0f;
  std::vector<float> d(z.size());
  for (float& v : d) v = u(rng);
  for (Activation a :
       {Activation::kRelu, Activation::kRelu6, Activation::kSigmoid, Activation::kTanh,
        Activation::kElu, Activation::kGelu, Activation::kSwish}) {
    SCOPED_TRACE(ActivationName(a));
    auto e = OneDnnEltwise::Create(a);
    ASSERT_TRUE(e.ok()) << e.status();
    const int64_t n = static_cast<int64_t>(z.size());
    std::vector<float> want(n), got(n), want_d = d, got_d(n);
    Activate(a, z.data(), want.data(), n);
    (*e)->Forward(z.data(), got.data(), n);
    ActivationBackward(a, z.data(), want.data(), want_d.data(), n);
    (*e)->Backward(z.data(), got.data(), d.data(), got_d.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-6 * std::max(1.0f, std::abs(want[i]))) << "f at " << z[i];
      ASSERT_NEAR(got_d[i], want_d[i], 2e-5 * std::max(1.0f, std::abs(want_d[i])))
          << "f' at " << z[i];
    }
  }
  EXPECT_EQ(OneDnnEltwise::Create(Activation::kSelu).status().message(),
            "oneDNN computes no selu here");
}

}  // namespace
}  // namespace pstrain::model
