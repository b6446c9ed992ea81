// Keras's gradient clipping on a replica's own gradients, end to end on the
// real Fashion-MNIST files: with clipnorm, no variable's SGD step moves it
// by more than learning_rate x clipnorm; with clipvalue, no element by more
// than learning_rate x clipvalue (to the float rounding of the steps); and
// the clipped runs do move.
#include <cmath>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "model/network.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

constexpr int kSteps = 40;

struct Moves {
  double largest_norm = 0;     // of one variable's change
  double largest_element = 0;  // of one element's change
};

Moves Train(const OptimizerSpec& optimizer) {
  model::JobSpec job;  // the default MLP on the IDX files
  job.optimizer = optimizer;
  job.max_steps = kSteps;
  job.device = model::Device::Cpu();
  absl::StatusOr<train::LocalResult> r = train::RunLocal(job, 1000000);
  EXPECT_OK(r.status());
  Moves moves;
  if (!r.ok()) return moves;
  auto net = model::Network::Create(job.model, 1);
  EXPECT_OK(net.status());
  const std::vector<float> initial = (*net)->InitialParameters(job.seed);
  for (size_t v = 0; v < (*net)->variables().size(); ++v) {
    const int64_t at = (*net)->offsets()[v], n = (*net)->variables()[v].elements();
    double sum = 0;
    for (int64_t i = at; i < at + n; ++i) {
      const double d = double{r->params[i]} - initial[i];
      sum += d * d;
      moves.largest_element = std::max(moves.largest_element, std::fabs(d));
    }
    moves.largest_norm = std::max(moves.largest_norm, std::sqrt(sum));
  }
  return moves;
}

TEST(ClippingTest, ClipnormAndClipvalueBoundEachStepAsKerasDoes) {
  OptimizerSpec sgd;
  sgd.learning_rate = 0.05f;
  const Moves free = Train(sgd);
  OptimizerSpec by_norm = sgd;
  by_norm.clipnorm = 0.01f;
  const Moves norm = Train(by_norm);
  OptimizerSpec by_value = sgd;
  by_value.clipvalue = 1e-4f;
  const Moves value = Train(by_value);
  // Each of kSteps steps moves a variable by at most lr * clipnorm.
  EXPECT_LE(norm.largest_norm, kSteps * 0.05 * 0.01 * 1.01);  // float rounding of the steps
  EXPECT_GT(norm.largest_norm, kSteps * 0.05 * 0.01 * 0.5);
  EXPECT_GT(free.largest_norm, 4 * norm.largest_norm);
  // And each element by at most lr * clipvalue.
  EXPECT_LE(value.largest_element, kSteps * 0.05 * 1e-4 * 1.01);  // float rounding of the steps
  EXPECT_GT(value.largest_element, kSteps * 0.05 * 1e-4 * 0.5);
  EXPECT_GT(free.largest_element, 4 * value.largest_element);
}

}  // namespace
}  // namespace pstrain
