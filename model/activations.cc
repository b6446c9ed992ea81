#include "model/activations.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain::model {
namespace {

// SELU's constants (Klambauer et al., as Keras has them).
constexpr float kSeluAlpha = 1.6732632423543772f;
constexpr float kSeluScale = 1.0507009873554805f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

constexpr Activation kAll[] = {Activation::kLinear, Activation::kRelu,  Activation::kRelu6,
                               Activation::kSigmoid, Activation::kTanh, Activation::kElu,
                               Activation::kSelu,   Activation::kGelu,  Activation::kSwish,
                               Activation::kSoftmax};

float Sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kLinear:
      return "linear";
    case Activation::kRelu:
      return "relu";
    case Activation::kRelu6:
      return "relu6";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
    case Activation::kElu:
      return "elu";
    case Activation::kSelu:
      return "selu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwish:
      return "swish";
    case Activation::kSoftmax:
      return "softmax";
  }
  return "?";
}

absl::StatusOr<Activation> ParseActivation(absl::string_view name) {
  if (name.empty()) return Activation::kLinear;
  if (name == "silu") return Activation::kSwish;
  for (Activation a : kAll) {
    if (name == ActivationName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", name,
      "\" is not an activation: linear, relu, relu6, sigmoid, tanh, elu, selu, gelu, swish "
      "(or silu) or softmax"));
}

bool ActivationNeedsInput(Activation a) {
  return a == Activation::kGelu || a == Activation::kSwish;
}

void Activate(Activation a, const float* z, float* out, int64_t n) {
  switch (a) {
    case Activation::kLinear:
    case Activation::kSoftmax:  // not elementwise: the loss's (REQUIRES)
      if (out != z) std::copy(z, z + n, out);
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) out[i] = std::max(z[i], 0.0f);
      return;
    case Activation::kRelu6:
      for (int64_t i = 0; i < n; ++i) out[i] = std::min(std::max(z[i], 0.0f), 6.0f);
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) out[i] = Sigmoid(z[i]);
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(z[i]);
      return;
    case Activation::kElu:
      for (int64_t i = 0; i < n; ++i) out[i] = z[i] > 0 ? z[i] : std::expm1(z[i]);
      return;
    case Activation::kSelu:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = kSeluScale * (z[i] > 0 ? z[i] : kSeluAlpha * std::expm1(z[i]));
      }
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = 0.5f * z[i] * (1.0f + std::erf(z[i] * kInvSqrt2));
      }
      return;
    case Activation::kSwish:
      for (int64_t i = 0; i < n; ++i) out[i] = z[i] * Sigmoid(z[i]);
      return;
  }
}

void ActivationBackward(Activation a, const float* z, const float* out, float* d, int64_t n) {
  switch (a) {
    case Activation::kLinear:
    case Activation::kSoftmax:
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = out[i] > 0 ? d[i] : 0.0f;
      return;
    case Activation::kRelu6:
      for (int64_t i = 0; i < n; ++i) d[i] = out[i] > 0 && out[i] < 6.0f ? d[i] : 0.0f;
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] *= out[i] * (1.0f - out[i]);
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) d[i] *= 1.0f - out[i] * out[i];
      return;
    case Activation::kElu:
      // Below 0: e^z = out + 1.
      for (int64_t i = 0; i < n; ++i) d[i] *= out[i] > 0 ? 1.0f : out[i] + 1.0f;
      return;
    case Activation::kSelu:
      // Below 0: scale * alpha * e^z = out + scale * alpha.
      for (int64_t i = 0; i < n; ++i) {
        d[i] *= out[i] > 0 ? kSeluScale : out[i] + kSeluScale * kSeluAlpha;
      }
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) {
        const float x = z[i];
        d[i] *= 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
      }
      return;
    case Activation::kSwish:
      for (int64_t i = 0; i < n; ++i) {
        const float s = Sigmoid(z[i]);
        d[i] *= s * (1.0f + z[i] * (1.0f - s));
      }
      return;
  }
}

void ActivationPass::Forward(int64_t n, float* out) {
  if (a_ == Activation::kLinear) return;
  if (ActivationNeedsInput(a_)) {
    if (z_.size() < static_cast<size_t>(n)) z_.resize(n);
    std::copy(out, out + n, z_.data());
  }
  Activate(a_, out, out, n);
}

void ActivationPass::Backward(int64_t n, const float* out, float* d_out) const {
  if (a_ == Activation::kLinear) return;
  ActivationBackward(a_, z_.data(), out, d_out, n);
}

}  // namespace pstrain::model
