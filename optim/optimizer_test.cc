#include "optim/optimizer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

// Applies `grads` one after another to a one-element variable starting at
// `v0` and returns the value after each step.
std::vector<float> ApplySequence(const OptimizerSpec& spec, float v0,
                                 const std::vector<float>& grads) {
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

// A table row outside a step's batch under dense table updates, as each
// Keras optimizer's sparse apply takes it: after one step of gradient 1,
// a second step leaves SGD's, momentum's and Adagrad's row as it is,
// decays Nadam's slots only, and moves Adam's row on a zero gradient.
TEST(OptimizerTest, ARowOutsideTheBatchIsTakenAsKerasTakesIt) {
  for (const char* name : {"sgd", "momentum", "adagrad", "nadam", "adam"}) {
    OptimizerSpec spec;
    spec.name = name;
    spec.learning_rate = 0.1f;
    auto opt = CreateOptimizer(spec);
    ASSERT_OK(opt);
    const int slots = (*opt)->num_slots();
    std::vector<float> row(1 + slots, 0.0f);  // value, then each slot (stride 1)
    (*opt)->InitSlots(row.data(), 1, 1);
    const float g = 1.0f;
    (*opt)->ApplyStrided(row.data(), &g, 1, 1, 1);
    const std::vector<float> before = row;
    (*opt)->ApplyToRowNotInBatch(row.data(), 1, 1, 2);
    if (std::string(name) == "adam") {
      EXPECT_NE(row[0], before[0]) << name;  // moved on a zero gradient
      std::vector<float> zero_step = before;
      const float zero = 0.0f;
      (*opt)->ApplyStrided(zero_step.data(), &zero, 1, 1, 2);
      EXPECT_EQ(row, zero_step) << name;
    } else if (std::string(name) == "nadam") {
      EXPECT_EQ(row[0], before[0]) << name;
      EXPECT_FLOAT_EQ(row[1], before[1] * spec.beta1) << name;
      EXPECT_FLOAT_EQ(row[2], before[2] * spec.beta2) << name;
    } else {
      EXPECT_EQ(row, before) << name;
    }
  }
}

TEST(OptimizerTest, SgdSubtractsLearningRateTimesGradient) {
  OptimizerSpec s{"sgd", 0.5f};
  EXPECT_EQ(ApplySequence(s, 1.0f, {2, 2, -4}), (std::vector<float>{0, -1, 1}));
}

// A non-trainable variable's rule adds what is pushed, exactly, through
// every entry point the PS uses (the exchanging one too: the previous
// values left where the increments were).
TEST(OptimizerTest, TheIncrementRuleAddsThePushedValuesExactly) {
  const std::unique_ptr<Optimizer> add = CreateIncrement();
  EXPECT_EQ(add->num_slots(), 0);
  std::vector<float> v = {1.5f, -2, 0.1f};
  const std::vector<float> inc = {0.25f, 3, 0.2f};
  add->ApplyStrided(v.data(), inc.data(), 3, 3, 7);
  EXPECT_EQ(v, (std::vector<float>{1.75f, 1, 0.1f + 0.2f}));
  std::vector<float> bytes = inc;
  ASSERT_TRUE(add->can_exchange());
  EXPECT_EQ(add->ApplyBytesExchanging(v.data(), reinterpret_cast<char*>(bytes.data()), 3, 8), 3);
  EXPECT_EQ(v, (std::vector<float>{2, 4, 0.1f + 0.2f + 0.2f}));
  EXPECT_EQ(bytes, (std::vector<float>{1.75f, 1, 0.1f + 0.2f}));
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

OptimizerSpec AdamSpec(float learning_rate) {
  OptimizerSpec s;
  s.name = "adam";
  s.learning_rate = learning_rate;
  return s;
}

// One step at count t from zero slots, at counts the optimizer keeps its
// step size for (optim/count_table.h), across its chunks, and beyond them.
TEST(OptimizerTest, AdamStepAtAnyCountIsTheClosedForm) {
  auto opt = CreateOptimizer(AdamSpec(0.01f));
  ASSERT_OK(opt);
  for (int64_t t : {1, 2, 3, 4095, 4096, 4097, 38000, 65535, 65536, 70000, 1000000}) {
    std::vector<float> value = {1.0f}, ms = {0.0f}, vs = {0.0f};
    const std::vector<absl::Span<float>> slots = {absl::MakeSpan(ms), absl::MakeSpan(vs)};
    const float g = 0.5f;
    (*opt)->Apply(absl::MakeSpan(value), absl::MakeConstSpan(&g, 1), slots, t);
    const double b1t = std::pow(0.9, t), b2t = std::pow(0.999, t);
    const double lr_t = 0.01 * std::sqrt(1 - b2t) / (1 - b1t);
    const double expected = 1.0 - lr_t * 0.05 / (std::sqrt(0.001 * 0.25) + 1e-7);
    EXPECT_NEAR(value[0], expected, 1e-6) << "count " << t;
    // The same count again gives the same step, bit for bit.
    std::vector<float> again = {1.0f}, ms2 = {0.0f}, vs2 = {0.0f};
    const std::vector<absl::Span<float>> slots2 = {absl::MakeSpan(ms2), absl::MakeSpan(vs2)};
    (*opt)->Apply(absl::MakeSpan(again), absl::MakeConstSpan(&g, 1), slots2, t);
    EXPECT_EQ(again[0], value[0]) << "count " << t;
  }
}

// Keras's Nadam (tf.keras.optimizers.Nadam), its recurrence written out in
// double: the momentum schedule's product carried step by step.
TEST(OptimizerTest, NadamFollowsKerasRecurrenceStepByStep) {
  OptimizerSpec s;
  s.name = "nadam";
  s.learning_rate = 0.002f;
  std::vector<float> grads;
  for (int t = 0; t < 300; ++t) grads.push_back(static_cast<float>(std::sin(t * 0.7) + 0.3));
  const std::vector<float> v = ApplySequence(s, 0.5f, grads);
  double var = 0.5, m = 0, vv = 0, product = 1;
  for (int t = 1; t <= 300; ++t) {
    const double g = grads[t - 1];
    const double u_t = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * t));
    const double u_next = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * (t + 1)));
    product *= u_t;
    const double product_next = product * u_next;
    m = 0.9 * m + 0.1 * g;
    vv = 0.999 * vv + 0.001 * g * g;
    const double m_hat = u_next * m / (1 - product_next) + (1 - u_t) * g / (1 - product);
    const double v_hat = vv / (1 - std::pow(0.999, t));
    var -= 0.002 * m_hat / (std::sqrt(v_hat) + 1e-7);
    ASSERT_NEAR(v[t - 1], var, 1e-5) << "step " << t;
  }
  // Far into training, the schedule's product in closed form still matches
  // the one carried step by step: one step at t = 20000 from m = v = 0.
  auto opt = CreateOptimizer(s);
  ASSERT_OK(opt);
  std::vector<float> value = {1.0f}, ms = {0.0f}, vs = {0.0f};
  const std::vector<absl::Span<float>> slots = {absl::MakeSpan(ms), absl::MakeSpan(vs)};
  const float g = 0.5f;
  (*opt)->Apply(absl::MakeSpan(value), absl::MakeConstSpan(&g, 1), slots, 20000);
  product = 1;
  for (int t = 1; t <= 20000; ++t) product *= 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * t));
  const double u_t = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * 20000));
  const double u_next = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * 20001));
  const double m_hat = u_next * 0.05 / (1 - product * u_next) + (1 - u_t) * 0.5 / (1 - product);
  const double v_hat = 0.001 * 0.25 / (1 - std::pow(0.999, 20000));
  EXPECT_NEAR(value[0], 1.0 - 0.002 * m_hat / (std::sqrt(v_hat) + 1e-7), 1e-6);
  // Beyond the counts Nadam keeps its factors for (70000), computed anew.
  value = {1.0f};
  ms = {0.0f};
  vs = {0.0f};
  (*opt)->Apply(absl::MakeSpan(value), absl::MakeConstSpan(&g, 1), slots, 70000);
  product = 1;
  for (int t = 1; t <= 70000; ++t) product *= 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * t));
  const double u_far = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * 70000));
  const double u_far_next = 0.9 * (1 - 0.5 * std::pow(0.96, 0.004 * 70001));
  const double m_far =
      u_far_next * 0.05 / (1 - product * u_far_next) + (1 - u_far) * 0.5 / (1 - product);
  const double v_far = 0.001 * 0.25 / (1 - std::pow(0.999, 70000));
  EXPECT_NEAR(value[0], 1.0 - 0.002 * m_far / (std::sqrt(v_far) + 1e-7), 1e-6);
}

// tf.raw_ops.ApplyFtrl by hand, learning-rate power -1/2: the accumulator
// starts at initial_accumulator, the value follows from the linear term and
// is exactly 0 while |linear| <= l1.
TEST(OptimizerTest, FtrlByHandWithL1ZeroingAndL2) {
  OptimizerSpec s;
  s.name = "ftrl";
  s.learning_rate = 0.5f;
  s.initial_accumulator = 0.1f;
  s.l1 = 0.2f;
  s.l2 = 0.05f;
  const std::vector<float> grads = {1.0f, -0.1f, 2.0f};
  const std::vector<float> v = ApplySequence(s, 0.3f, grads);
  double var = 0.3, acc = 0.1, lin = 0;
  for (size_t t = 0; t < grads.size(); ++t) {
    const double g = grads[t], a = acc + g * g;
    lin += g - (std::sqrt(a) - std::sqrt(acc)) / 0.5 * var;
    const double quadratic = std::sqrt(a) / 0.5 + 2 * 0.05;
    var = std::fabs(lin) > 0.2 ? ((lin > 0 ? 0.2 : -0.2) - lin) / quadratic : 0.0;
    acc = a;
    EXPECT_NEAR(v[t], var, 1e-6) << "step " << t;
  }
  // A small gradient leaves |linear| under l1: the value is exactly 0.
  s.l1 = 10.0f;
  EXPECT_EQ(ApplySequence(s, 0.3f, {0.5f}), std::vector<float>{0.0f});
  s.l1 = -1;
  EXPECT_EQ(CreateOptimizer(s).status().message(), "optimizer l1 -1 must be 0 or more");
}

// Adam's step on a gradient as received (raw bytes at an odd alignment)
// gives Apply's values and slots bit for bit: the PS applies received
// bytes, train --local aligned floats, and the two must agree.
TEST(OptimizerTest, AdamOnReceivedBytesMatchesApplyBitForBit) {
  auto opt = CreateOptimizer(AdamSpec(0.003f));
  ASSERT_OK(opt);
  constexpr int64_t kN = 4096 + 37;
  std::vector<float> grad(kN);
  std::vector<float> values(kN), m(kN), v(kN);
  for (int64_t i = 0; i < kN; ++i) {
    grad[i] = std::cos(0.37f * i) / (1 + i % 7);
    values[i] = std::sin(0.1f * i);
    m[i] = 0.01f * std::sin(0.3f * i);
    v[i] = 0.001f * (1 + i % 5);
  }
  std::vector<char> bytes(kN * 4 + 3);
  char* g = bytes.data() + 3;
  std::memcpy(g, grad.data(), kN * 4);
  std::vector<float> values2 = values, m2 = m, v2 = v;
  for (int64_t t : {int64_t{1}, int64_t{57}, int64_t{100000}}) {
    const std::vector<absl::Span<float>> slots = {absl::MakeSpan(m), absl::MakeSpan(v)};
    const std::vector<absl::Span<float>> slots2 = {absl::MakeSpan(m2), absl::MakeSpan(v2)};
    (*opt)->Apply(absl::MakeSpan(values), grad, slots, t);
    (*opt)->ApplyBytes(absl::MakeSpan(values2), g, slots2, t);
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(values2[i], values[i]) << "count " << t << " element " << i;
      ASSERT_EQ(m2[i], m[i]) << "count " << t << " element " << i;
      ASSERT_EQ(v2[i], v[i]) << "count " << t << " element " << i;
    }
  }
}

// SGD's exchanging step gives ApplyBytes's values bit for bit (at an odd
// gradient alignment, over a length that is no multiple of a vector) and
// leaves the previous values in the gradient's bytes, so copying them back
// restores the variable exactly.
TEST(OptimizerTest, SgdExchangingStepMatchesApplyBytesAndUndoesExactly) {
  auto opt = CreateOptimizer(OptimizerSpec{"sgd", 0.37f});
  ASSERT_OK(opt);
  ASSERT_TRUE((*opt)->can_exchange());
  constexpr int64_t kN = 1000 + 13;
  std::vector<float> before(kN), grad(kN);
  for (int64_t i = 0; i < kN; ++i) {
    before[i] = std::sin(0.1f * i) * 3.0f;
    grad[i] = std::cos(0.37f * i) / (1 + i % 7);
  }
  std::vector<char> bytes(kN * 4 + 3);
  char* g = bytes.data() + 3;
  std::memcpy(g, grad.data(), kN * 4);

  std::vector<float> expected = before;
  (*opt)->ApplyBytes(absl::MakeSpan(expected), g, {}, 1);
  std::vector<float> values = before;
  EXPECT_EQ((*opt)->ApplyBytesExchanging(values.data(), g, kN, 1), kN);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(values[i], expected[i]) << "element " << i;
    ASSERT_NE(expected[i], before[i]) << "element " << i;
  }
  std::vector<float> undone(kN);
  std::memcpy(undone.data(), g, kN * 4);
  EXPECT_EQ(undone, before);

  // A NaN at element 200 stops the pass at the start of its block (192):
  // what comes before is applied, the rest untouched, its bytes as sent.
  std::vector<float> bad = grad;
  bad[200] = NAN;
  std::memcpy(g, bad.data(), kN * 4);
  values = before;
  const int64_t block = Optimizer::kExchangeBlock;
  EXPECT_EQ((*opt)->ApplyBytesExchanging(values.data(), g, kN, 1), 200 / block * block);
  for (int64_t i = 0; i < kN; ++i) {
    float in_grad;
    std::memcpy(&in_grad, g + 4 * i, 4);
    if (i < 192) {
      ASSERT_EQ(values[i], expected[i]) << "element " << i;
      ASSERT_EQ(in_grad, before[i]) << "element " << i;
    } else {
      ASSERT_EQ(values[i], before[i]) << "element " << i;
      if (i != 200) {
        ASSERT_EQ(in_grad, grad[i]) << "element " << i;
      }
    }
  }
  // In the last, partial block too.
  bad = grad;
  bad[kN - 2] = -INFINITY;
  std::memcpy(g, bad.data(), kN * 4);
  values = before;
  EXPECT_EQ((*opt)->ApplyBytesExchanging(values.data(), g, kN, 1), kN / block * block);
}

TEST(OptimizerTest, OnlySgdExchanges) {
  for (const char* name : {"momentum", "adagrad", "adam", "nadam", "ftrl"}) {
    OptimizerSpec s;
    s.name = name;
    auto opt = CreateOptimizer(s);
    ASSERT_OK(opt);
    EXPECT_FALSE((*opt)->can_exchange()) << name;
  }
}

// Keras's schedules, at the optimizer's iterations (t - 1 for update t).
TEST(OptimizerTest, LearningRateSchedulesFollowKerasFormulas) {
  OptimizerSpec spec;
  spec.learning_rate = 0.1f;
  ASSERT_OK_AND_ASSIGN(auto constant, CreateOptimizer(spec));
  EXPECT_EQ(constant->LearningRate(1), 0.1f);
  EXPECT_EQ(constant->LearningRate(1000000), 0.1f);
  EXPECT_FALSE(constant->scheduled());

  spec.schedule = "exponential_decay";
  spec.decay_steps = 100;
  spec.decay_rate = 0.5f;
  ASSERT_OK_AND_ASSIGN(auto exponential, CreateOptimizer(spec));
  EXPECT_TRUE(exponential->scheduled());
  EXPECT_FLOAT_EQ(exponential->LearningRate(1), 0.1f);     // step 0
  EXPECT_FLOAT_EQ(exponential->LearningRate(101), 0.05f);  // step 100
  EXPECT_FLOAT_EQ(exponential->LearningRate(51), 0.1f * std::sqrt(0.5f));
  spec.staircase = true;
  ASSERT_OK_AND_ASSIGN(auto stairs, CreateOptimizer(spec));
  EXPECT_FLOAT_EQ(stairs->LearningRate(100), 0.1f);    // step 99
  EXPECT_FLOAT_EQ(stairs->LearningRate(201), 0.025f);  // step 200

  spec.schedule = "inverse_time_decay";
  spec.staircase = false;
  spec.decay_rate = 1.0f;
  ASSERT_OK_AND_ASSIGN(auto inverse, CreateOptimizer(spec));
  EXPECT_FLOAT_EQ(inverse->LearningRate(301), 0.025f);  // 0.1 / (1 + 3)

  spec.schedule = "cosine_decay";
  spec.alpha = 0.1f;
  ASSERT_OK_AND_ASSIGN(auto cosine, CreateOptimizer(spec));
  EXPECT_FLOAT_EQ(cosine->LearningRate(1), 0.1f);
  EXPECT_FLOAT_EQ(cosine->LearningRate(51), 0.1f * (0.9f * 0.5f + 0.1f));
  EXPECT_FLOAT_EQ(cosine->LearningRate(101), 0.01f);  // alpha * lr from there on
  EXPECT_FLOAT_EQ(cosine->LearningRate(5001), 0.01f);

  spec.schedule = "piecewise_constant";
  spec.boundaries = {10, 20};
  spec.values = {1.0f, 0.5f, 0.1f};
  ASSERT_OK_AND_ASSIGN(auto piecewise, CreateOptimizer(spec));
  EXPECT_EQ(piecewise->LearningRate(11), 1.0f);  // step 10 <= 10
  EXPECT_EQ(piecewise->LearningRate(12), 0.5f);
  EXPECT_EQ(piecewise->LearningRate(21), 0.5f);
  EXPECT_EQ(piecewise->LearningRate(22), 0.1f);

  // Every optimizer takes its step with the scheduled rate: SGD's step is
  // lr(t) * g, and Adam's first step lr(t) * sign(g).
  spec.name = "sgd";
  EXPECT_EQ(ApplySequence(spec, 0.0f, std::vector<float>(12, 1.0f))[11], -(11 * 1.0f + 0.5f));
  spec.name = "adam";
  const std::vector<float> adam = ApplySequence(spec, 0.0f, {2.0f});
  EXPECT_NEAR(adam[0], -1.0f, 1e-5);
  spec.name = "sgd";
  ASSERT_OK_AND_ASSIGN(auto sgd, CreateOptimizer(spec));
  std::vector<float> values = {1.0f, 1.0f};
  std::vector<float> grad = {1.0f, 2.0f};
  EXPECT_EQ(sgd->ApplyBytesExchanging(values.data(), reinterpret_cast<char*>(grad.data()), 2, 30),
            2);
  EXPECT_EQ(values, (std::vector<float>{0.9f, 0.8f}));
}

// tf.clip_by_norm and tf.clip_by_value on one variable's gradient.
TEST(OptimizerTest, ClipsAGradientByNormOrByValue) {
  OptimizerSpec spec;
  std::vector<float> g = {3, 4};
  ClipGradient(spec, g.data(), 2);  // neither set: as it is
  EXPECT_EQ(g, (std::vector<float>{3, 4}));
  spec.clipnorm = 1;
  ClipGradient(spec, g.data(), 2);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  std::vector<float> small = {0.3f, -0.4f};
  ClipGradient(spec, small.data(), 2);  // norm 0.5: under the bound
  EXPECT_EQ(small, (std::vector<float>{0.3f, -0.4f}));
  spec.clipnorm = 0;
  spec.clipvalue = 0.5f;
  std::vector<float> values = {-2, -0.25f, 0.5f, 7, std::nanf("")};
  ClipGradient(spec, values.data(), 5);
  EXPECT_EQ(values[0], -0.5f);
  EXPECT_EQ(values[1], -0.25f);
  EXPECT_EQ(values[2], 0.5f);
  EXPECT_EQ(values[3], 0.5f);
  EXPECT_TRUE(std::isnan(values[4]));  // still refused where it arrives
}

TEST(OptimizerTest, RefusesASchedulesMissingSettingsNamingThem) {
  auto error = [](const OptimizerSpec& spec) {
    auto opt = CreateOptimizer(spec);
    return opt.ok() ? std::string("ok") : std::string(opt.status().message());
  };
  OptimizerSpec spec;
  spec.schedule = "linear";
  EXPECT_EQ(error(spec),
            "learning-rate schedule \"linear\" is not one of constant, exponential_decay, "
            "inverse_time_decay, cosine_decay, piecewise_constant");
  spec.schedule = "exponential_decay";
  EXPECT_EQ(error(spec),
            "learning-rate schedule exponential_decay: decay_steps 0 must be 1 or more");
  spec.decay_steps = 10;
  EXPECT_EQ(error(spec),
            "learning-rate schedule exponential_decay: decay_rate 0 must be in (0, 1]");
  spec.decay_rate = 0.9f;
  EXPECT_EQ(error(spec), "ok");
  spec.schedule = "cosine_decay";
  spec.alpha = 2;
  EXPECT_EQ(error(spec), "learning-rate schedule cosine_decay: alpha 2 must be in [0, 1]");
  spec.schedule = "piecewise_constant";
  spec.boundaries = {10, 5};
  spec.values = {1, 2};
  EXPECT_EQ(error(spec),
            "learning-rate schedule piecewise_constant: 2 boundaries need 3 values, not 2");
  spec.values = {1, 2, 3};
  EXPECT_EQ(error(spec),
            "learning-rate schedule piecewise_constant: boundaries must rise: 5 "
            "follows 10");
  spec.boundaries = {5, 10};
  spec.values = {1, 0, 3};
  EXPECT_EQ(error(spec),
            "learning-rate schedule piecewise_constant: value 0 must be a positive finite number");
}

TEST(OptimizerTest, RejectsBadHyperParametersNamingTheField) {
  OptimizerSpec s;
  s.name = "rmsprop";
  EXPECT_EQ(CreateOptimizer(s).status().message(),
            "unknown optimizer \"rmsprop\" (known: sgd, momentum, adagrad, adam, nadam, ftrl)");
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
}  // namespace pstrain::optim
