#include "cluster/optimizer_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status CheckSchedule(const OptimizerSpec& spec) {
  const std::string& kind = spec.schedule;
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("learning-rate schedule ", kind, ": ", what));
  };
  if (kind == "constant") return absl::OkStatus();
  if (kind == "exponential_decay" || kind == "inverse_time_decay" || kind == "cosine_decay") {
    if (spec.decay_steps < 1) {
      return bad(absl::StrCat("decay_steps ", spec.decay_steps, " must be 1 or more"));
    }
    if (kind == "cosine_decay") {
      if (!(spec.alpha >= 0 && spec.alpha <= 1)) {
        return bad(absl::StrCat("alpha ", spec.alpha, " must be in [0, 1]"));
      }
      return absl::OkStatus();
    }
    const float most = kind == "exponential_decay" ? 1.0f : 1e6f;
    if (!(spec.decay_rate > 0 && spec.decay_rate <= most)) {
      return bad(absl::StrCat("decay_rate ", spec.decay_rate, " must be in (0, ", most, "]"));
    }
    return absl::OkStatus();
  }
  if (kind == "piecewise_constant") {
    if (spec.values.size() != spec.boundaries.size() + 1) {
      return bad(absl::StrCat(spec.boundaries.size(), " boundaries need ",
                              spec.boundaries.size() + 1, " values, not ", spec.values.size()));
    }
    for (size_t i = 1; i < spec.boundaries.size(); ++i) {
      if (spec.boundaries[i] <= spec.boundaries[i - 1]) {
        return bad(absl::StrCat("boundaries must rise: ", spec.boundaries[i], " follows ",
                                spec.boundaries[i - 1]));
      }
    }
    for (float v : spec.values) {
      if (!(v > 0) || !std::isfinite(v)) {
        return bad(absl::StrCat("value ", v, " must be a positive finite number"));
      }
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("learning-rate schedule \"", kind,
                   "\" is not one of constant, exponential_decay, inverse_time_decay, "
                   "cosine_decay, piecewise_constant"));
}

float ScheduledLearningRate(const OptimizerSpec& s, int64_t t) {
  if (s.schedule == "constant") return s.learning_rate;
  const double step = static_cast<double>(std::max<int64_t>(t - 1, 0));
  if (s.schedule == "piecewise_constant") {
    size_t i = 0;
    while (i < s.boundaries.size() && step > static_cast<double>(s.boundaries[i])) ++i;
    return s.values[i];
  }
  const double steps = static_cast<double>(s.decay_steps);
  double p = step / steps;
  if (s.staircase) p = std::floor(p);
  double rate = s.learning_rate;
  if (s.schedule == "exponential_decay") {
    rate *= std::pow(static_cast<double>(s.decay_rate), p);
  } else if (s.schedule == "inverse_time_decay") {
    rate /= 1 + static_cast<double>(s.decay_rate) * p;
  } else if (s.schedule == "cosine_decay") {
    const double done = std::min(step, steps) / steps;
    const double alpha = s.alpha;
    rate *= (1 - alpha) * 0.5 * (1 + std::cos(M_PI * done)) + alpha;
  }
  return static_cast<float>(rate);
}

void ClipGradient(const OptimizerSpec& spec, float* g, int64_t n) {
  if (spec.clipvalue > 0) {
    const float v = spec.clipvalue;
    for (int64_t i = 0; i < n; ++i) g[i] = std::min(std::max(g[i], -v), v);
  }
  if (spec.clipnorm > 0) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
    const double norm = std::sqrt(sum);
    if (norm > spec.clipnorm) {
      const float scale = static_cast<float>(spec.clipnorm / norm);
      for (int64_t i = 0; i < n; ++i) g[i] *= scale;
    }
  }
}

}  // namespace pstrain
