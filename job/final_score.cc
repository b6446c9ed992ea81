#include "job/final_score.h"

#include "base/logging.h"
#include "cluster/checkpoint_layout.h"

namespace pstrain {

bool WaitForFinalScore(const std::string& output_dir, int64_t step, absl::Duration wait,
                       absl::Duration poll, const Clock* clock) {
  if (ReadScoredStep(output_dir) >= step) return true;
  if (wait <= absl::ZeroDuration()) return false;
  Log("waiting up to ", absl::FormatDuration(wait),
      " (--eval_wait_secs) for the evaluator to score the final checkpoint, step ", step);
  const absl::Time start = clock->Now();
  while (ReadScoredStep(output_dir) < step) {
    if (clock->Now() - start >= wait) {
      Log("the evaluator has not scored step ", step, " after ", absl::FormatDuration(wait),
          " (--eval_wait_secs); ending without its score");
      return false;
    }
    clock->SleepFor(poll);
  }
  Log("the evaluator scored the final checkpoint (step ", step, ") after ",
      absl::FormatDuration(absl::Trunc(clock->Now() - start, absl::Milliseconds(100))));
  return true;
}

}  // namespace pstrain
