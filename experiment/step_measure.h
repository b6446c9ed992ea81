// The cost model's step measured on this machine (`pstrain plan
// --measure`): PS processes of the pstrain binary on loopback, worker
// threads pushing and pulling a model of the given size through the real
// client.
#ifndef PSTRAIN_EXPERIMENT_STEP_MEASURE_H_
#define PSTRAIN_EXPERIMENT_STEP_MEASURE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain::experiment {

// Mean step time of `workers` threads each pushing and pulling the whole
// model (`model_bytes`, split over `num_ps` PS by the placement) for
// `duration` after one warm-up round, on `num_ps` PS processes started
// from `pstrain_path` (and killed before this returns). The errors of
// starting, reaching or calling them.
absl::StatusOr<double> MeasureStep(const std::string& pstrain_path, double model_bytes, int workers,
                                   int num_ps, absl::Duration duration);

// Mean time of one ring all-reduce (transport/ring.h) of `model_bytes` of
// floats among `workers` members, each a thread of this process with its
// own TCP links on loopback (no shared memory: the links a ring between
// hosts has), for `duration` after one warm-up all-reduce: the exchange of
// an all-reduce step with no PS. 0 for one worker (nothing to exchange).
// Errors of forming the ring or of a collective.
absl::StatusOr<double> MeasureAllReduceStep(double model_bytes, int workers,
                                            absl::Duration duration);

}  // namespace pstrain::experiment

#endif  // PSTRAIN_EXPERIMENT_STEP_MEASURE_H_
