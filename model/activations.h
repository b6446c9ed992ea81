// Keras's activation functions, by their Keras names, elementwise on the
// CPU: what `activation:` on a dense or convolution layer applies after
// its bias, and what an `activation` or `relu` layer applies alone.
//   linear   z
//   relu     max(z, 0)
//   relu6    min(max(z, 0), 6)        (Keras's ReLU(6.0), MobileNetV2's)
//   sigmoid  1 / (1 + e^-z)
//   tanh     tanh(z)
//   elu      z, or e^z - 1 below 0    (alpha 1)
//   selu     1.0507 * elu with alpha 1.67326
//   gelu     z * Phi(z), Phi the normal CDF (Keras's exact form, not tanh's)
//   swish    z * sigmoid(z)           (also silu)
//   softmax  over the last axis: only a classifier's last layer, whose
//            logits the loss then takes (model/network.h), as Keras's
//            cross-entropy takes a softmax's probabilities
#ifndef PSTRAIN_MODEL_ACTIVATIONS_H_
#define PSTRAIN_MODEL_ACTIVATIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::model {

enum class Activation {
  kLinear,
  kRelu,
  kRelu6,
  kSigmoid,
  kTanh,
  kElu,
  kSelu,
  kGelu,
  kSwish,
  kSoftmax,
};

// "linear", "relu", ... as Keras names them ("swish" for kSwish).
const char* ActivationName(Activation a);

// By Keras's name ("silu" is swish; "" is linear). InvalidArgument naming
// the choices for any other.
absl::StatusOr<Activation> ParseActivation(absl::string_view name);

// Whether the derivative needs the input z (gelu, swish) rather than the
// output alone.
bool ActivationNeedsInput(Activation a);

// out[i] = f(z[i]) for i < n; `z` and `out` may be the same array.
// REQUIRES: a != kSoftmax.
void Activate(Activation a, const float* z, float* out, int64_t n);

// d[i] *= f'(z[i]) for i < n, from the output `out` (and, where
// ActivationNeedsInput, the input `z`; else it may be null).
// REQUIRES: a != kSoftmax.
void ActivationBackward(Activation a, const float* z, const float* out, float* d, int64_t n);

// What a misplaced softmax is told: only the last dense layer has one.
inline constexpr char kSoftmaxOnlyLast[] =
    "softmax is the last dense layer's only (the loss takes its logits)";

// An activation applied in place to a layer's output (after its bias),
// keeping what its derivative needs: the output, and a copy of the input
// where the output alone does not tell (gelu, swish). Linear does
// nothing; softmax is taken as linear (the loss applies it).
// Thread-compatible: it holds the last Forward's inputs.
class ActivationPass {
 public:
  explicit ActivationPass(Activation a) : a_(a == Activation::kSoftmax ? Activation::kLinear : a) {}

  void Forward(int64_t n, float* out);
  // After Forward over the same `out`: d_out becomes the gradient before
  // the activation.
  void Backward(int64_t n, const float* out, float* d_out) const;

 private:
  const Activation a_;
  std::vector<float> z_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ACTIVATIONS_H_
