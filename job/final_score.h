// The last edge of a job with an evaluator: the task that wrote the final
// checkpoint waits, up to --eval_wait_secs, for the evaluator's score of
// it (<output_dir>/eval/scored, cluster/checkpoint_layout.h), so that an
// orchestrator that removes the job once its chief exits (a TFJob) keeps
// the evaluator until the final score exists. The PS mode's chief
// (coordinator/job_finisher.h) and the all-reduce mode's chief replica
// (allreduce/allreduce_main.cc) both end through it. Thread-compatible.
#ifndef PSTRAIN_JOB_FINAL_SCORE_H_
#define PSTRAIN_JOB_FINAL_SCORE_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "base/clock.h"

namespace pstrain {

// Returns at once when `wait` is not positive or the evaluator has already
// scored `step` or later. Else logs that it waits, then polls every `poll`
// on `clock` until the score of `step` is there (logs how long it took)
// or `wait` has passed (logs that the job ends without it). True when the
// step was scored by the time it returns.
bool WaitForFinalScore(const std::string& output_dir, int64_t step, absl::Duration wait,
                       absl::Duration poll, const Clock* clock);

}  // namespace pstrain

#endif  // PSTRAIN_JOB_FINAL_SCORE_H_
