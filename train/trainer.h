// The training loop of one replica: pull the parameters, compute gradients on
// the next local batch, push each layer's gradient and pull its new values as
// soon as backprop produces it (job.push_per_layer; else the whole model in
// one round trip after the step), with the next step's compute overlapping
// the round trips where the mode allows; repeat, with Keras-like progress
// lines. A model with an embedding bag also pulls the rows its next batch
// names while the current batch computes, and pushes the row gradients
// behind it (its table is async). The consistency mode is the PS's
// business: in sync mode the pull waits for the aggregated step, under ssp
// for the slowest replica; async never waits. When a PS is lost, the
// replica waits (logging whom and since when) until every PS serves
// initialised variables of one generation again: under another generation
// (in either direction) the chief restored them from a checkpoint, and the
// replica carries on from its step; under the same one (a PS that was slow
// or unreachable for a while, not restarted) it carries on where it was.
// Thread-compatible; one Trainer per thread.
#ifndef PSTRAIN_TRAIN_TRAINER_H_
#define PSTRAIN_TRAIN_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/parameter_store.h"
#include "data/batch_source.h"
#include "model/backend.h"
#include "model/job_spec.h"

namespace pstrain::train {

// What a caller running the step loop itself (`train --local`) does between
// steps. Called on the step loop's thread.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Asked before each step: a non-zero value (a signal's number) ends the
  // schedule there; the exchanges in flight are waited for, and the result
  // says who stopped it (TrainerResult::stopped_by).
  virtual int StopBefore(int64_t step) { return 0; }
  // After step `step` of `total` (1-based, in the schedule), its exchanges
  // ended (TrainerOptions::exact): an epoch's test score, a checkpoint. Time
  // spent here does not count as training time. An error ends the loop.
  virtual absl::Status AfterStep(int64_t step, int64_t total) { return absl::OkStatus(); }
};

struct TrainerOptions {
  model::JobSpec job;
  int replica = 0;
  int num_replicas = 1;
  // Progress line every 200 steps: a few lines per epoch on Fashion-MNIST.
  int log_every_steps = 200;
  // async and ssp: compute the next step while this step's push-then-pull
  // is in flight (its gradient then misses this replica's own last update;
  // async updates allow that). sync jobs always wait for the step.
  bool overlap_communication = true;
  // When not empty, the progress scalars (loss, accuracy, examples/s,
  // steps/s, global step, learning rate) also go to TensorBoard event files
  // and JSON lines in this directory at every progress line
  // (base/event_file.h), at the job's global step (as the evaluator's
  // scores), never backwards within a run.
  std::string summary_dir;
  // How long to wait, when a PS is lost or restored from a checkpoint under
  // this replica, for the chief to put every PS back on one checkpoint
  // before carrying on from its step. Zero: fail at once.
  absl::Duration recovery_wait = absl::Minutes(2);
  // The tasks behind replica numbers ("chief:0", "worker:0", ...), to name
  // them when a sync step times out waiting for some; may be empty.
  std::vector<std::string> replica_names;
  // The size of the whole training split (data::TrainingInput's), which
  // sync and ssp schedules count in; 0: the source's share x num_replicas.
  int64_t split_examples = 0;
  // Straggler injection: sleep `step_delay` before a step, on each step
  // with `step_delay_probability` (drawn from the job's seed and replica).
  absl::Duration step_delay = absl::ZeroDuration();
  double step_delay_probability = 1;
  // Every step computes on the values every earlier step's update left,
  // dense and rows alike: no step overlaps the exchanges of the one
  // before, and a step's rows are pulled behind the previous step's
  // pushes. With one replica, the arithmetic of one process applying each
  // step in turn (`train --local`).
  bool exact = false;
  // Computes on this backend (of the job's model, for batches of at least
  // job.batch_size) instead of one made for the job; not owned.
  model::Backend* backend = nullptr;
  // Between steps (requires `exact`); not owned. Null: none.
  StepObserver* observer = nullptr;
  // >= 0: the schedule starts at this step, as the caller decided and
  // logged (a local run resuming its checkpoint); the store's restored step
  // and push counts are not asked.
  int64_t start_at = -1;
};

struct TrainerResult {
  int64_t steps = 0;
  int64_t examples = 0;
  double final_loss = 0;      // mean over the last logging window
  double final_accuracy = 0;  // training accuracy over the same window
  double seconds = 0;
  double examples_per_sec = 0;
  int64_t last_global_step = 0;  // as the last step began
  int recoveries = 0;            // times it carried on after PS were restored
  // The steps of its schedule (sync: the job's aggregated steps; async and
  // ssp: its own), and its place in it as the last step began.
  int64_t schedule_steps = 0;
  int64_t schedule_step = 0;
  // From the first step to the last exchange's end, less the observer's
  // time (TrainerOptions::observer); of it, how long steps stood waiting
  // for their batch.
  double train_seconds = 0;
  double input_wait_seconds = 0;
  // The signal that ended the schedule early (StepObserver::StopBefore), or 0.
  int stopped_by = 0;
};

// Sets options->step_delay from the job's --straggler entry for `task`
// ("worker:1") or for "all", and logs it; nothing when neither is named.
void ApplyStraggler(const std::string& task, TrainerOptions* options);

// Runs the whole schedule (job.epochs over this replica's shard, or
// job.max_steps), drawing batches from `source` (REQUIRES: of the job's
// batch size; not used by anyone else meanwhile), exchanging parameters
// with `store` (REQUIRES: ready, its variables initialised; laid out as the
// job's model lays them out). Errors from the store (naming the PS), the
// model or the source.
absl::StatusOr<TrainerResult> RunTrainer(const TrainerOptions& options, data::BatchSource* source,
                                         client::ParameterStore* store);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_TRAINER_H_
