#include "optim/initializer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cluster/initializer_spec.h"

namespace pstrain::optim {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t NameHash(absl::string_view s) {  // FNV-1a: stable across builds
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

absl::StatusOr<Initializer> Initializer::Parse(absl::string_view spec) {
  if (IsStreamInitializer(spec)) {
    auto place = ParseStreamInitializer(spec);
    if (!place.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("initializer ", place.status().message()));
    }
    Initializer init;
    init.stream_ = *place;
    return init;
  }
  auto parsed = ParseInitializerSpec(spec);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("initializer ", parsed.status().message()));
  }
  Initializer init;
  init.scale_ = parsed->limit;  // zeros, ones: 0
  init.constant_ = parsed->kind == InitializerSpec::Kind::kOnes ? 1.0f : 0.0f;
  return init;
}

void Initializer::FillFrom(InitialStream& stream, int64_t first, int64_t n, float* out) const {
  stream.Fill(stream_->first_draw + first, stream_->limit, n, out);
}

void Initializer::Fill(uint64_t seed, absl::string_view variable, int64_t first,
                       int64_t n, float* out) const {
  if (stream_.has_value()) {
    InitialStream stream(seed);
    FillFrom(stream, first, n, out);
    return;
  }
  if (scale_ == 0.0f) {
    std::fill(out, out + n, constant_);
    return;
  }
  const uint64_t base = SplitMix64(seed ^ NameHash(variable));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = SplitMix64(base + static_cast<uint64_t>(first + i));
    const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = (2.0f * u - 1.0f) * scale_;
  }
}

}  // namespace pstrain::optim
