#include "ps_server/optimizer.h"

#include <cmath>
#include <vector>

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

// Applies `grads` one after another to a one-element variable starting at
// `v0` and returns the value after each step.
std::vector<float> ApplySequence(const OptimizerSpec& spec, float v0, const std::vector<float>& grads) {
  auto opt = CreateOptimizer(spec);
  EXPECT_OK(opt);
  std::vector<float> value = {v0};
  std::vector<std::vector<float>> slot_store((*opt)->num_slots());
  std::vector<absl::Span<float>> slots;
  for (int s = 0; s < (*opt)->num_slots(); ++s) {
    slot_store[s] = {(*opt)->initial_slot_value(s)};
    slots.push_back(absl::MakeSpan(slot_store[s]));
  }
  std::vector<float> out;
  for (size_t t = 0; t < grads.size(); ++t) {
    (*opt)->Apply(absl::MakeSpan(value), absl::MakeConstSpan(&grads[t], 1), slots, t + 1);
    out.push_back(value[0]);
  }
  return out;
}

TEST(OptimizerTest, SgdSubtractsLearningRateTimesGradient) {
  OptimizerSpec s{"sgd", 0.5f};
  EXPECT_EQ(ApplySequence(s, 1.0f, {2, 2, -4}), (std::vector<float>{0, -1, 1}));
}

TEST(OptimizerTest, MomentumByHand) {
  OptimizerSpec s;
  s.name = "momentum";
  s.learning_rate = 0.1f;
  s.momentum = 0.5f;
  // accum: 1, 1.5, 1.75 ; var: 1-0.1, -0.15, -0.175
  auto v = ApplySequence(s, 1.0f, {1, 1, 1});
  EXPECT_FLOAT_EQ(v[0], 0.9f);
  EXPECT_FLOAT_EQ(v[1], 0.75f);
  EXPECT_FLOAT_EQ(v[2], 0.575f);
}

TEST(OptimizerTest, NesterovByHand) {
  OptimizerSpec s;
  s.name = "momentum";
  s.learning_rate = 0.1f;
  s.momentum = 0.5f;
  s.nesterov = true;
  // accum 1: var -= 0.1*(1 + 0.5*1) = 0.15 ; accum 1.5: var -= 0.1*(1+0.75) = 0.175
  auto v = ApplySequence(s, 1.0f, {1, 1});
  EXPECT_FLOAT_EQ(v[0], 0.85f);
  EXPECT_FLOAT_EQ(v[1], 0.675f);
}

TEST(OptimizerTest, AdagradByHand) {
  OptimizerSpec s;
  s.name = "adagrad";
  s.learning_rate = 1.0f;
  s.initial_accumulator = 0.0001f;
  s.epsilon = 1e-7f;
  // accum 4.0001: var -= 2/sqrt(4.0001) ; accum 8.0001: var -= 2/sqrt(8.0001)
  auto v = ApplySequence(s, 0.0f, {2, 2});
  const double e0 = -2 / (std::sqrt(4.0001) + 1e-7);
  const double e1 = e0 - 2 / (std::sqrt(8.0001) + 1e-7);
  EXPECT_NEAR(v[0], e0, 1e-6);
  EXPECT_NEAR(v[1], e1, 1e-6);
}

TEST(OptimizerTest, AdamMatchesClosedFormForAConstantGradient) {
  // With a constant gradient g, m_t = (1-b1^t) g and v_t = (1-b2^t) g^2, so
  // each step moves the variable by lr * g/(|g| + eps_hat) with
  // eps_hat = eps*sqrt(1-b2^t)... i.e. almost exactly lr per step.
  OptimizerSpec s;
  s.name = "adam";
  s.learning_rate = 0.01f;
  const std::vector<float> grads(50, 3.0f);
  auto v = ApplySequence(s, 1.0f, grads);
  double expected = 1.0;
  for (int t = 1; t <= 50; ++t) {
    const double b1t = std::pow(0.9, t), b2t = std::pow(0.999, t);
    const double m = (1 - b1t) * 3.0, vv = (1 - b2t) * 9.0;
    expected -= 0.01 * std::sqrt(1 - b2t) / (1 - b1t) * m / (std::sqrt(vv) + 1e-7);
    EXPECT_NEAR(v[t - 1], expected, 1e-5) << "step " << t;
  }
  EXPECT_NEAR(v.back(), 1.0 - 0.5, 1e-4);
}

TEST(OptimizerTest, AdamFirstStepsByHand) {
  OptimizerSpec s;
  s.name = "adam";
  s.learning_rate = 0.1f;
  s.beta1 = 0.5f;
  s.beta2 = 0.75f;
  s.epsilon = 1e-7f;
  // t=1, g=1: m=0.5, v=0.25, lr_t=0.1*sqrt(0.25)/0.5=0.1 -> var -= 0.1*0.5/0.5 = 0.1
  // t=2, g=-2: m=0.25-1=-0.75, v=0.1875+1=1.1875, lr_t=0.1*sqrt(1-0.5625)/0.75
  auto v = ApplySequence(s, 0.0f, {1, -2});
  EXPECT_NEAR(v[0], -0.1, 1e-6);
  const double lr2 = 0.1 * std::sqrt(0.4375) / 0.75;
  EXPECT_NEAR(v[1], -0.1 - lr2 * (-0.75) / (std::sqrt(1.1875) + 1e-7), 1e-6);
}

TEST(OptimizerTest, RejectsBadHyperParametersNamingTheField) {
  OptimizerSpec s;
  s.name = "rmsprop";
  EXPECT_EQ(CreateOptimizer(s).status().message(),
            "unknown optimizer \"rmsprop\" (known: sgd, momentum, adagrad, adam)");
  s.name = "sgd";
  s.learning_rate = -1;
  EXPECT_EQ(CreateOptimizer(s).status().message(),
            "optimizer learning_rate -1 must be a positive finite number");
  s = OptimizerSpec();
  s.name = "momentum";
  s.momentum = 1.5f;
  EXPECT_EQ(CreateOptimizer(s).status().message(), "optimizer momentum 1.5 must be in [0, 1)");
  s = OptimizerSpec();
  s.name = "adam";
  s.beta2 = 1.0f;
  EXPECT_EQ(CreateOptimizer(s).status().message(), "optimizer beta2 1 must be in [0, 1)");
}

}  // namespace
}  // namespace pstrain::ps
