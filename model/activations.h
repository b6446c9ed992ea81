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

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ACTIVATIONS_H_
