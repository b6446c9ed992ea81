// The optimizer a job trains with and its hyper-parameters: chosen in the
// job's flags, sent by the chief to every PS in CreateVariables, applied on
// the PS (optim/optimizer.h). Plain data.
#ifndef PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_
#define PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_

#include <string>

namespace pstrain {

struct OptimizerSpec {
  std::string name = "sgd";      // sgd, momentum, adagrad, adam, nadam, ftrl
  float learning_rate = 0.01f;
  // momentum: accum = momentum * accum + g; var -= lr * accum, or with
  // nesterov var -= lr * (g + momentum * accum). 0.9 is the usual choice.
  float momentum = 0.9f;
  bool nesterov = false;
  // adagrad: accum += g^2; var -= lr * g / (sqrt(accum) + epsilon); the
  // accumulator starts at 0.1 as in TensorFlow, so early steps stay bounded.
  float initial_accumulator = 0.1f;
  // adam and nadam: Keras's defaults.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-7f;
  // ftrl (FTRL-Proximal, learning-rate power -1/2, its accumulator starting
  // at initial_accumulator): L1 and L2 regularization strengths, >= 0.
  float l1 = 0.0f;
  float l2 = 0.0f;
  // Embedding tables: every held row moves at every step with the table's
  // step count (Keras's Adam), not only the rows a batch names, each with
  // its own count (lazy, the default; TensorFlow's LazyAdam).
  bool dense_table_updates = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_
