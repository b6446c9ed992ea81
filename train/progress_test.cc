#include "train/progress.h"

#include "gtest/gtest.h"

namespace pstrain::train {
namespace {

TEST(ProgressTest, LineAndScalarsAsKerasPrintsThem) {
  model::BatchResult window;
  window.loss_sum = 20;
  window.correct = 75;
  window.count = 100;
  EXPECT_EQ(ProgressLine(40, 1000, window, 1234.4, 12.6, 98.2),
            "step 40/1000 - loss 0.2000 - accuracy 0.7500 - 1234 examples/s - 13s elapsed - "
            "ETA 98s");
  Scalars scalars = ProgressScalars(window, 1234.5, 38.6, 80, 0.05);
  EXPECT_EQ(scalars, (Scalars{{"loss", 0.2},
                              {"accuracy", 0.75},
                              {"examples_per_sec", 1234.5},
                              {"steps_per_sec", 38.6},
                              {"global_step", 80},
                              {"learning_rate", 0.05}}));
  // Binary labels add the AUC: one positive above one negative.
  window.AddScore(0.8f, 1);
  window.AddScore(0.3f, 0);
  EXPECT_EQ(ProgressLine(40, 1000, window, 1234.4, 12.6, 98.2),
            "step 40/1000 - loss 0.2000 - accuracy 0.7500 - auc 1.0000 - 1234 examples/s - 13s "
            "elapsed - ETA 98s");
  scalars = ProgressScalars(window, 1234.5, 38.6, 80, 0.05);
  ASSERT_EQ(scalars.size(), 7u);
  EXPECT_EQ(scalars.back(), (std::pair<std::string, double>{"auc", 1.0}));
  EXPECT_EQ(window.ScoreScalars(), (Scalars{{"loss", 0.2}, {"accuracy", 0.75}, {"auc", 1.0}}));
}

}  // namespace
}  // namespace pstrain::train
