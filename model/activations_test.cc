#include "model/activations.h"

#include <cmath>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

constexpr Activation kElementwise[] = {
    Activation::kLinear, Activation::kRelu, Activation::kRelu6, Activation::kSigmoid,
    Activation::kTanh,   Activation::kElu,  Activation::kSelu,  Activation::kGelu,
    Activation::kSwish};

TEST(ActivationsTest, ValuesAreKerasFormulas) {
  const std::vector<float> z = {-3.0f, -0.5f, 0.0f, 0.7f, 7.0f};
  auto at = [&](Activation a) {
    std::vector<float> out(z.size());
    Activate(a, z.data(), out.data(), static_cast<int64_t>(z.size()));
    return out;
  };
  EXPECT_EQ(at(Activation::kRelu6), (std::vector<float>{0, 0, 0, 0.7f, 6}));
  EXPECT_EQ(at(Activation::kRelu), (std::vector<float>{0, 0, 0, 0.7f, 7}));
  for (size_t i = 0; i < z.size(); ++i) {
    const double x = z[i];
    EXPECT_NEAR(at(Activation::kSigmoid)[i], 1 / (1 + std::exp(-x)), 1e-6);
    EXPECT_NEAR(at(Activation::kTanh)[i], std::tanh(x), 1e-6);
    EXPECT_NEAR(at(Activation::kElu)[i], x > 0 ? x : std::exp(x) - 1, 1e-6);
    EXPECT_NEAR(at(Activation::kSelu)[i],
                1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1)), 1e-5);
    EXPECT_NEAR(at(Activation::kGelu)[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(at(Activation::kSwish)[i], x / (1 + std::exp(-x)), 1e-6);
  }
  // In place.
  std::vector<float> v = z;
  Activate(Activation::kTanh, v.data(), v.data(), static_cast<int64_t>(v.size()));
  EXPECT_EQ(v, at(Activation::kTanh));
}

TEST(ActivationsTest, DerivativesMatchCentralDifferences) {
  // Away from the kinks of relu and relu6 (0 and 6).
  const std::vector<float> z = {-2.3f, -0.6f, -0.1f, 0.2f, 1.3f, 4.0f, 6.5f};
  for (Activation a : kElementwise) {
    std::vector<float> out(z.size()), d(z.size(), 1.0f);
    Activate(a, z.data(), out.data(), static_cast<int64_t>(z.size()));
    ActivationBackward(a, z.data(), out.data(), d.data(), static_cast<int64_t>(z.size()));
    for (size_t i = 0; i < z.size(); ++i) {
      const float eps = 1e-3f;
      float up = z[i] + eps, down = z[i] - eps, fu, fd;
      Activate(a, &up, &fu, 1);
      Activate(a, &down, &fd, 1);
      EXPECT_NEAR(d[i], (double{fu} - fd) / (2 * eps), 2e-3) << ActivationName(a) << " at " << z[i];
    }
  }
}

TEST(ActivationsTest, NamesParseAsKerasWritesThem) {
  for (Activation a : kElementwise) {
    ASSERT_OK_AND_ASSIGN(Activation parsed, ParseActivation(ActivationName(a)));
    EXPECT_EQ(parsed, a);
  }
  ASSERT_OK_AND_ASSIGN(Activation silu, ParseActivation("silu"));
  EXPECT_EQ(silu, Activation::kSwish);
  ASSERT_OK_AND_ASSIGN(Activation none, ParseActivation(""));
  EXPECT_EQ(none, Activation::kLinear);
  EXPECT_EQ(ParseActivation("leaky_relu").status().message(),
            "\"leaky_relu\" is not an activation: linear, relu, relu6, sigmoid, tanh, elu, selu, "
            "gelu, swish (or silu) or softmax");
}

}  // namespace
}  // namespace pstrain::model
