// How many PS to run, from a written cost model (`pstrain plan`).
//
// Per training step of a data-parallel job with N workers, a model of B
// bytes, links of BW bytes/s and T of compute:
//   - every worker pushes its gradient and pulls the values: 2B through its
//     own link, 2B / BW;
//   - PS p holds 1/P of the model and carries that share of every worker's
//     traffic: 2BN / P through its link, 2BN / (P BW);
//   - a step takes T plus the slower of the two (links in parallel, no
//     overlap of compute and transfer): T + max(2B, 2BN / P) / BW.
//   - a ring all-reduce of the same gradient moves 2B (N - 1) / N through
//     each worker's link: T + 2B (N - 1) / (N BW), with no PS at all.
// The recommendation is the fewest PS whose step is within 10% of the
// step with unlimited PS (T + 2B / BW). Pure functions.
#ifndef PSTRAIN_EXPERIMENT_COST_MODEL_H_
#define PSTRAIN_EXPERIMENT_COST_MODEL_H_

#include <vector>

namespace pstrain::experiment {

struct PlanRow {
  int num_ps = 0;
  double ps_bytes = 0;  // per PS per step
  double step_s = 0;    // predicted step time with num_ps PS
};

struct Plan {
  std::vector<PlanRow> rows;  // 1..max_ps
  double allreduce_step_s = 0;
  double floor_step_s = 0;  // unlimited PS
  // The fewest PS whose step is within 10% of floor_step_s, or max_ps when
  // none of 1..max_ps is (cap_binds).
  int recommended_ps = 1;
  bool cap_binds = false;
  // The fewest PS within 10% of the floor, and the fewest that reach it
  // (the workers' count: from there each worker's own link is the limit),
  // whatever max_ps is.
  int ps_within_10_percent = 1;
  int ps_at_floor = 1;
  // The compute per step from which one PS is within 10% of unlimited PS
  // (its extra traffic hidden in the margin): 0 when it already is.
  double one_ps_enough_from_compute_s = 0;
};

// The cost model above for PS counts 1..max_ps. REQUIRES: every argument
// positive except compute_s (>= 0).
Plan MakePlan(double model_bytes, int workers, double bandwidth_bytes_per_s, double compute_s,
              int max_ps);

}  // namespace pstrain::experiment

#endif  // PSTRAIN_EXPERIMENT_COST_MODEL_H_
