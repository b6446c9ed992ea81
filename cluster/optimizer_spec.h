// The optimizer a job trains with and its hyper-parameters: chosen in the
// job's flags or model config, sent by the chief to every PS in
// CreateVariables, applied on the PS (optim/optimizer.h). Plain data, with
// its schedule's checks and rates, and the replicas' gradient clipping.
#ifndef PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_
#define PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

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

  // The learning rate over the steps, as Keras's
  // tf.keras.optimizers.schedules compute it from the optimizer's
  // iterations (`step`: the updates applied before this one; for the rows
  // of a lazily updated table, the row's own, as its bias correction
  // counts them):
  //   constant            learning_rate
  //   exponential_decay   learning_rate * decay_rate^(step / decay_steps)
  //   inverse_time_decay  learning_rate / (1 + decay_rate * step / decay_steps)
  //                       (both with staircase: the division floored)
  //   cosine_decay        learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi *
  //                       min(step, decay_steps) / decay_steps)) + alpha)
  //   piecewise_constant  values[0] while step <= boundaries[0], values[i]
  //                       while boundaries[i - 1] < step <= boundaries[i],
  //                       the last value after the last boundary
  //                       (learning_rate unused)
  std::string schedule = "constant";
  int64_t decay_steps = 0;
  float decay_rate = 0.0f;
  bool staircase = false;
  float alpha = 0.0f;
  std::vector<int64_t> boundaries;
  std::vector<float> values;

  // Keras's gradient clipping (one at most; 0: off), applied by each
  // replica to its own gradient of every dense variable before it leaves:
  // clipnorm scales a variable's gradient to an L2 norm of at most this
  // (tf.clip_by_norm), clipvalue clamps each element into [-v, v].
  float clipnorm = 0.0f;
  float clipvalue = 0.0f;
};

// InvalidArgument naming the setting for an unknown schedule, or one
// without what it needs: decay_steps >= 1 and a decay_rate > 0
// (exponential and inverse time; exponential's at most 1), alpha in [0, 1]
// (cosine), boundaries rising and one value more than them, each positive
// and finite (piecewise).
absl::Status CheckSchedule(const OptimizerSpec& spec);

// Clips one variable's gradient `g` (n floats) in place as `spec` says
// (clipnorm or clipvalue; nothing when neither is set).
void ClipGradient(const OptimizerSpec& spec, float* g, int64_t n);

// The learning rate of the t-th update (t >= 1; the schedule's step is
// t - 1). REQUIRES: CheckSchedule(spec) is OK.
float ScheduledLearningRate(const OptimizerSpec& spec, int64_t t);

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_OPTIMIZER_SPEC_H_
