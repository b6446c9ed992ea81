// The initializer specs that model configs and CreateVariables name, read in
// one place: "zeros", "ones" (batch normalization's gamma and moving
// variance), "uniform:A" (uniform in [-A, A], A finite and at least
// 0) and, for dense kernels, "glorot_uniform" (uniform with the limit
// sqrt(6 / (fan_in + fan_out)), as Keras's default).
#ifndef PSTRAIN_CLUSTER_INITIALIZER_SPEC_H_
#define PSTRAIN_CLUSTER_INITIALIZER_SPEC_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

struct InitializerSpec {
  enum class Kind { kZeros, kOnes, kUniform, kGlorotUniform };
  Kind kind = Kind::kZeros;
  float limit = 0.0f;  // kUniform: A
};

// InvalidArgument when `spec` is none of the above, or is glorot_uniform
// where `allow_glorot` is false; the message quotes it and lists what is
// accepted: "\"twos\" is not zeros, ones or uniform:A (A >= 0)" (callers
// put the field in front).
absl::StatusOr<InitializerSpec> ParseInitializerSpec(absl::string_view spec,
                                                     bool allow_glorot = false);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_INITIALIZER_SPEC_H_
