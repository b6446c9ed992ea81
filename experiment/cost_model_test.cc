#include "experiment/cost_model.h"

#include "gtest/gtest.h"

namespace pstrain::experiment {
namespace {

// 100 MB model, 4 workers, 1 GB/s links, 50 ms compute: a worker's link
// takes 200 ms a step; 1 PS carries 800 MB (800 ms), 2 PS 400 ms, 4 PS
// 200 ms, which is the floor; all-reduce moves 150 MB per link (150 ms).
TEST(PlanTest, TheCostModelByHand) {
  const Plan plan = MakePlan(100e6, 4, 1e9, 0.05, 8);
  ASSERT_EQ(plan.rows.size(), 8u);
  EXPECT_DOUBLE_EQ(plan.rows[0].ps_bytes, 800e6);
  EXPECT_DOUBLE_EQ(plan.rows[0].step_s, 0.85);
  EXPECT_DOUBLE_EQ(plan.rows[1].step_s, 0.45);
  EXPECT_DOUBLE_EQ(plan.rows[2].step_s, 0.05 + 800e6 / 3 / 1e9);
  EXPECT_DOUBLE_EQ(plan.rows[3].step_s, 0.25);
  EXPECT_DOUBLE_EQ(plan.rows[7].step_s, 0.25);  // the worker's link bounds it
  EXPECT_DOUBLE_EQ(plan.floor_step_s, 0.25);
  EXPECT_DOUBLE_EQ(plan.allreduce_step_s, 0.2);
  EXPECT_EQ(plan.recommended_ps, 4);
  EXPECT_FALSE(plan.cap_binds);
  EXPECT_EQ(plan.ps_within_10_percent, 4);  // 3 PS: 0.3167 s > 0.275 s
  EXPECT_EQ(plan.ps_at_floor, 4);
}

// 400 MB, 64 workers, 10 GB/s: unlimited PS give 80 ms (each worker's own
// link); 16 PS, the default cap, give 320 ms. The cap binds: 59 PS come
// within 10% (2 x 400 MB x 64 / 59 / 10 GB/s = 86.8 ms; 58 give 88.3 ms)
// and 64 reach 80 ms.
TEST(PlanTest, ACapThatBindsIsSaid) {
  const Plan plan = MakePlan(400e6, 64, 10e9, 0, 16);
  EXPECT_TRUE(plan.cap_binds);
  EXPECT_EQ(plan.recommended_ps, 16);
  EXPECT_DOUBLE_EQ(plan.rows.back().step_s, 0.32);
  EXPECT_DOUBLE_EQ(plan.floor_step_s, 0.08);
  EXPECT_EQ(plan.ps_within_10_percent, 59);
  EXPECT_EQ(plan.ps_at_floor, 64);
  const Plan wide = MakePlan(400e6, 64, 10e9, 0, 64);
  EXPECT_FALSE(wide.cap_binds);
  EXPECT_EQ(wide.recommended_ps, 59);
}

// Long compute hides part of the PS's traffic in the 10% margin: 3 PS
// (1.2667 s) are within 10% of the 1.2 s floor.
TEST(PlanTest, ComputeHeavyStepsNeedFewerPs) {
  const Plan plan = MakePlan(100e6, 4, 1e9, 1.0, 8);
  EXPECT_EQ(plan.recommended_ps, 3);
}

// A 1 MB model, 4 workers on 1.25 GB/s links: without compute 4 PS reach
// the 1.6 ms floor, but one PS (6.4 ms of traffic) is within 10% of the
// floor once a step computes for (6.4 - 1.76) / 0.1 = 46.4 ms, and then it
// is what the plan recommends.
TEST(PlanTest, ItSaysWhenOnePsIsEnough) {
  const Plan bare = MakePlan(1e6, 4, 1.25e9, 0, 8);
  EXPECT_EQ(bare.recommended_ps, 4);
  EXPECT_NEAR(bare.one_ps_enough_from_compute_s, 0.0464, 1e-9);
  EXPECT_EQ(MakePlan(1e6, 4, 1.25e9, 0.0465, 8).recommended_ps, 1);
  EXPECT_EQ(MakePlan(1e6, 4, 1.25e9, 0.046, 8).recommended_ps, 2);
}

}  // namespace
}  // namespace pstrain::experiment
