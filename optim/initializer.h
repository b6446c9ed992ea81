// Initial values a PS computes itself: for embedding rows created on first
// pull, and for dense slices when CreateVariables carries no values (large
// models, benchmarks). Each element's value is a pure function of (seed,
// variable name, element index in the whole variable), so it does not depend
// on how the variable is sharded or when a row is first touched.
// Specs: "zeros", "ones", "uniform:A" (uniform in [-A, A]), and "stream:A@K": the
// values of the job's initial stream (cluster/initial_stream.h) from draw K
// on, what a model's dense variables are created with.
#ifndef PSTRAIN_OPTIM_INITIALIZER_H_
#define PSTRAIN_OPTIM_INITIALIZER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cluster/initial_stream.h"

namespace pstrain::optim {

class Initializer {
 public:
  // InvalidArgument naming the spec when it is not one of the above (A must
  // be finite and non-negative).
  static absl::StatusOr<Initializer> Parse(absl::string_view spec);

  // Fills out[0, n) with the values of elements [first, first + n) of
  // variable `variable`. A stream initializer draws from a fresh stream
  // (the draws before `first` cost their time; FillFrom reads one stream
  // forward across slices).
  void Fill(uint64_t seed, absl::string_view variable, int64_t first, int64_t n,
            float* out) const;

  // The stream's place when this is a stream initializer.
  const std::optional<StreamPlace>& stream() const { return stream_; }

  // A stream initializer's elements [first, first + n) from `stream` (the
  // job's seed). REQUIRES: stream().has_value().
  void FillFrom(InitialStream& stream, int64_t first, int64_t n, float* out) const;

 private:
  float scale_ = 0.0f;  // 0: every value is `constant_`
  float constant_ = 0.0f;  // zeros or ones
  std::optional<StreamPlace> stream_;
};

}  // namespace pstrain::optim

#endif  // PSTRAIN_OPTIM_INITIALIZER_H_
