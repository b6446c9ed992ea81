#include "cluster/initializer_spec.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pstrain {

absl::StatusOr<InitializerSpec> ParseInitializerSpec(absl::string_view spec, bool allow_glorot) {
  InitializerSpec out;
  if (spec == "zeros") return out;
  if (spec == "ones") {
    out.kind = InitializerSpec::Kind::kOnes;
    return out;
  }
  if (allow_glorot && spec == "glorot_uniform") {
    out.kind = InitializerSpec::Kind::kGlorotUniform;
    return out;
  }
  float a = 0;
  absl::string_view limit = spec;
  if (absl::ConsumePrefix(&limit, "uniform:") && absl::SimpleAtof(limit, &a) &&
      std::isfinite(a) && a >= 0) {
    out.kind = InitializerSpec::Kind::kUniform;
    out.limit = a;
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", spec, "\" is not ", allow_glorot ? "glorot_uniform, " : "",
                   "zeros, ones or uniform:A (A >= 0)"));
}

}  // namespace pstrain
