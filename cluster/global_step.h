// The job's global step across its PS: the slowest PS's. A PS that holds
// frozen variables alone (no push reaches it) answers kNoStep and is passed
// by, as is a step not read yet.
#ifndef PSTRAIN_CLUSTER_GLOBAL_STEP_H_
#define PSTRAIN_CLUSTER_GLOBAL_STEP_H_

#include <algorithm>
#include <cstdint>

namespace pstrain {

// What a PS without a step of its own answers (store/shard_store.h).
inline constexpr int64_t kNoStep = -1;

// The slower of `so_far` (kNoStep: none yet) and one PS's `step` (kNoStep:
// it has none).
inline int64_t SlowerStep(int64_t so_far, int64_t step) {
  if (step < 0) return so_far;
  return so_far < 0 ? step : std::min(so_far, step);
}

}  // namespace pstrain

#endif  // PSTRAIN_CLUSTER_GLOBAL_STEP_H_
