// Initial values a PS computes itself: for embedding rows created on first
// pull, and for dense slices when CreateVariables carries no values (large
// models, benchmarks). Each element's value is a pure function of (seed,
// variable name, element index in the whole variable), so it does not depend
// on how the variable is sharded or when a row is first touched.
// Specs: "zeros", "uniform:A" (uniform in [-A, A]).
#ifndef PSTRAIN_OPTIM_INITIALIZER_H_
#define PSTRAIN_OPTIM_INITIALIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::optim {

class Initializer {
 public:
  // InvalidArgument naming the spec when it is not one of the above (A must
  // be finite and non-negative).
  static absl::StatusOr<Initializer> Parse(absl::string_view spec);

  // Fills out[0, n) with the values of elements [first, first + n) of
  // variable `variable`.
  void Fill(uint64_t seed, absl::string_view variable, int64_t first, int64_t n,
            float* out) const;

 private:
  float scale_ = 0.0f;  // 0: zeros
};

}  // namespace pstrain::optim

#endif  // PSTRAIN_OPTIM_INITIALIZER_H_
