#include "experiment/step_measure.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::experiment {
namespace {

TEST(MeasureAllReduceStepTest, OneWorkerExchangesNothing) {
  ASSERT_OK_AND_ASSIGN(double s, MeasureAllReduceStep(4e6, 1, absl::Milliseconds(100)));
  EXPECT_EQ(s, 0);
}

TEST(MeasureAllReduceStepTest, ARingOfThreeTakesTimeThatGrowsWithTheModel) {
  ASSERT_OK_AND_ASSIGN(double small, MeasureAllReduceStep(64e3, 3, absl::Milliseconds(200)));
  ASSERT_OK_AND_ASSIGN(double large, MeasureAllReduceStep(16e6, 3, absl::Milliseconds(200)));
  EXPECT_GT(small, 0);
  EXPECT_LT(large, 5.0);  // 16 MB, three members: milliseconds, not seconds
  EXPECT_GT(large, small);  // 250x the bytes
}

}  // namespace
}  // namespace pstrain::experiment
