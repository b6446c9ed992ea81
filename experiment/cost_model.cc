#include "experiment/cost_model.h"

#include <algorithm>
#include <cmath>

namespace pstrain::experiment {

Plan MakePlan(double model_bytes, int workers, double bandwidth, double compute_s, int max_ps) {
  Plan plan;
  const double worker_link = 2 * model_bytes / bandwidth;
  plan.floor_step_s = compute_s + worker_link;
  plan.allreduce_step_s = compute_s + 2 * model_bytes * (workers - 1) / workers / bandwidth;
  plan.recommended_ps = max_ps;
  for (int p = 1; p <= max_ps; ++p) {
    PlanRow row;
    row.num_ps = p;
    row.ps_bytes = 2 * model_bytes * workers / p;
    row.step_s = compute_s + std::max(worker_link, row.ps_bytes / bandwidth);
    plan.rows.push_back(row);
  }
  // compute + t1 <= 1.1 (compute + link), t1 one PS's traffic time.
  const double one_ps = std::max(worker_link, 2 * model_bytes * workers / bandwidth);
  plan.one_ps_enough_from_compute_s = std::max(0.0, (one_ps - 1.1 * worker_link) / 0.1);
  plan.cap_binds = true;
  for (const PlanRow& row : plan.rows) {
    if (row.step_s <= 1.1 * plan.floor_step_s) {
      plan.recommended_ps = row.num_ps;
      plan.cap_binds = false;
      break;
    }
  }
  // p PS are within 10% when compute + 2BN / (p BW) <= 1.1 floor, and at the
  // floor from p = N on.
  plan.ps_at_floor = workers;
  const double ps_side = 2 * model_bytes * workers / bandwidth;
  const double within = std::ceil(ps_side / (1.1 * plan.floor_step_s - compute_s) * (1 - 1e-12));
  plan.ps_within_10_percent =
      static_cast<int>(std::clamp(within, 1.0, static_cast<double>(workers)));
  return plan;
}

}  // namespace pstrain::experiment
