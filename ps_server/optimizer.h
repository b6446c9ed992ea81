// Optimizers applied by the PS to a slice when a gradient arrives. An
// Optimizer is stateless apart from its hyper-parameters; per-element state
// (slots) lives beside the slice in ShardStore. Thread-compatible: callers
// hold the slice's lock.
#ifndef PSTRAIN_PS_SERVER_OPTIMIZER_H_
#define PSTRAIN_PS_SERVER_OPTIMIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain::ps {

struct OptimizerSpec {
  std::string name = "sgd";
  float learning_rate = 0.01f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies `grad` to `values`. REQUIRES: values.size() == grad.size().
  virtual void Apply(absl::Span<float> values,
                     absl::Span<const float> grad) const = 0;
};

// InvalidArgument for an unknown name or a learning rate that is not a
// positive finite number. Known: "sgd".
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerSpec& spec);

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_OPTIMIZER_H_
