#include "model/mlp.h"

#include <cmath>
#include <random>

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

// Gradient checks of every layer, and batch and label errors, run for each
// backend in backend_test.cc.

TEST(MlpTest, VariablesAndLayout) {
  ASSERT_OK_AND_ASSIGN(auto mlp, Mlp::Create(MlpSpec::FromWidths(784, {128}, 10), 32));
  ASSERT_EQ(mlp->variables().size(), 4u);
  EXPECT_EQ(mlp->variables()[0].name, "dense_0/kernel");
  EXPECT_EQ(mlp->variables()[0].shape, (std::vector<int64_t>{784, 128}));
  EXPECT_EQ(mlp->variables()[3].name, "dense_1/bias");
  EXPECT_EQ(mlp->offsets()[2], 784 * 128 + 128);
  EXPECT_EQ(mlp->num_parameters(), 784 * 128 + 128 + 128 * 10 + 10);
  // The layout says which variables each layer has and where they are.
  const ParamLayout& layout = mlp->layout();
  EXPECT_EQ(layout.num_layers(), 2);
  EXPECT_EQ(layout.LayerVariables(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(layout.OffsetOf(1, ParamRole::kKernel), 784 * 128 + 128);
  EXPECT_EQ(layout.OffsetOf(1, ParamRole::kBias), 784 * 128 + 128 + 128 * 10);
  EXPECT_EQ(layout.FirstTable(), -1);
  EXPECT_EQ(mlp->InitialParameters(5), mlp->InitialParameters(5));
  EXPECT_NE(mlp->InitialParameters(5), mlp->InitialParameters(6));
}

TEST(MlpTest, SgdOnASeparableProblemReachesFullAccuracy) {
  ASSERT_OK_AND_ASSIGN(auto mlp, Mlp::Create(MlpSpec::FromWidths(2, {8}, 2), 16));
  std::vector<float> params = mlp->InitialParameters(1), grads(mlp->num_parameters());
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(16 * 2);
  std::vector<int32_t> y(16);
  for (int step = 0; step < 400; ++step) {
    for (int i = 0; i < 16; ++i) {
      x[2 * i] = u(rng);
      x[2 * i + 1] = u(rng);
      y[i] = x[2 * i] + x[2 * i + 1] > 0 ? 1 : 0;
    }
    ASSERT_OK(mlp->ComputeGradients(params.data(), x.data(), y.data(), 16, grads.data()));
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.5f * grads[i];
  }
  ASSERT_OK_AND_ASSIGN(BatchResult r, mlp->Evaluate(params.data(), x.data(), y.data(), 16));
  EXPECT_GE(r.correct, 15);
}

TEST(MlpTest, RejectsBadLayersNamingThem) {
  auto message = [](const MlpSpec& spec) {
    return std::string(Mlp::Create(spec, 4).status().message());
  };
  MlpSpec spec = MlpSpec::FromWidths(3, {4}, 2);
  spec.layers[1].relu = true;
  EXPECT_EQ(message(spec),
            "model layer 1 (dense_1): the last layer gives the logits of softmax cross-entropy: "
            "no activation");
  spec = MlpSpec::FromWidths(3, {4}, 1);
  EXPECT_EQ(message(spec),
            "model layer 1 (dense_1): the last layer needs one unit per class, at least 2");
  spec = MlpSpec::FromWidths(3, {4}, 2);
  spec.layers[1].name = "dense_0";
  EXPECT_EQ(message(spec), "model layer 1 (dense_0): the name is used twice");
  spec = MlpSpec::FromWidths(3, {4}, 2);
  spec.layers[0].kernel_initializer = "he_normal";
  EXPECT_EQ(message(spec),
            "model layer 0 (dense_0): kernel initializer \"he_normal\" is not glorot_uniform, "
            "zeros or uniform:A (A >= 0)");
  EXPECT_EQ(message(MlpSpec{3, {}}), "model has no layers");
  EXPECT_EQ(message(MlpSpec::FromWidths(2, {0}, 3)), "model layer 0 (dense_0): has 0 units");
}

TEST(MlpTest, LayerWithoutReluIsLinearAndInitializersApply) {
  // Two linear layers compose into one linear map, so the gradient check
  // above covers it; here: no ReLU means negative pre-activations pass.
  MlpSpec spec = MlpSpec::FromWidths(2, {3}, 2);
  spec.layers[0].relu = false;
  spec.layers[0].kernel_initializer = "zeros";
  spec.layers[0].bias_initializer = "uniform:0.5";
  ASSERT_OK_AND_ASSIGN(auto mlp, Mlp::Create(spec, 2));
  std::vector<float> p = mlp->InitialParameters(4);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], 0.0f);  // dense_0/kernel
  bool any_nonzero = false;
  for (int i = 6; i < 9; ++i) {
    EXPECT_LE(std::fabs(p[i]), 0.5f);
    any_nonzero |= p[i] != 0.0f;
  }
  EXPECT_TRUE(any_nonzero);
  for (int i = 6; i < 9; ++i) p[i] = -1.0f;  // negative hidden outputs
  for (int i = 9; i < 15; ++i) p[i] = 1.0f;  // dense_1/kernel all ones
  p[15] = 0.0f;
  p[16] = 0.0f;
  std::vector<float> x = {0.0f, 0.0f};
  std::vector<int32_t> y = {0};
  std::vector<float> g(mlp->num_parameters());
  ASSERT_OK(mlp->ComputeGradients(p.data(), x.data(), y.data(), 1, g.data()));
  // Logits are equal (-3, -3): p = 0.5 each; dL/dlogit0 = -0.5; every hidden
  // unit feeds both logits with weight 1, so dL/dh = -0.5 + 0.5 = 0, but the
  // kernel gradient of dense_1 is h * delta = -1 * -0.5 = 0.5: non-zero only
  // because the negative hidden values were not clipped to 0.
  EXPECT_NEAR(g[9], 0.5f, 1e-6);
  EXPECT_NEAR(g[10], -0.5f, 1e-6);
}

}  // namespace
}  // namespace pstrain::model
