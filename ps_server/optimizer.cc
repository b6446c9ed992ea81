#include "ps_server/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain::ps {
namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(float lr) : lr_(lr) {}
  void Apply(absl::Span<float> values,
             absl::Span<const float> grad) const override {
    float* v = values.data();
    const float* g = grad.data();
    const size_t n = values.size();
    for (size_t i = 0; i < n; ++i) v[i] -= lr_ * g[i];
  }

 private:
  const float lr_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerSpec& spec) {
  if (!(spec.learning_rate > 0) || !std::isfinite(spec.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer learning_rate ", spec.learning_rate,
        " must be a positive finite number"));
  }
  if (spec.name == "sgd") return std::make_unique<Sgd>(spec.learning_rate);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", spec.name, "\" (known: sgd)"));
}

}  // namespace pstrain::ps
