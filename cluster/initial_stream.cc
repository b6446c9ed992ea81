#include "cluster/initial_stream.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace pstrain {

std::string StreamInitializer(const StreamPlace& place) {
  // 9 significant digits read back as the same float.
  return absl::StrFormat("stream:%.9g@%d", place.limit, place.first_draw);
}

bool IsStreamInitializer(absl::string_view spec) { return absl::StartsWith(spec, "stream:"); }

absl::StatusOr<StreamPlace> ParseStreamInitializer(absl::string_view spec) {
  absl::string_view rest = spec;
  StreamPlace place;
  const size_t at = rest.find('@');
  if (absl::ConsumePrefix(&rest, "stream:") && at != absl::string_view::npos &&
      absl::SimpleAtof(rest.substr(0, rest.find('@')), &place.limit) &&
      std::isfinite(place.limit) && place.limit >= 0 &&
      absl::SimpleAtoi(rest.substr(rest.find('@') + 1), &place.first_draw) &&
      place.first_draw >= 0) {
    return place;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", spec, "\" is not stream:A@K (A >= 0, K >= 0)"));
}

void InitialStream::Fill(int64_t draw, float limit, int64_t n, float* out) {
  if (draw < position_) {
    rng_ = std::mt19937_64(seed_);
    position_ = 0;
  }
  rng_.discard(static_cast<unsigned long long>(draw - position_));
  std::uniform_real_distribution<float> dist(-limit, limit);
  for (int64_t i = 0; i < n; ++i) out[i] = dist(rng_);
  position_ = draw + n;
}

}  // namespace pstrain
