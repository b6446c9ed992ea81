// `pstrain train --local`: the job's model, data pipeline and optimizer in
// one process with no PS, the reference for a cluster's accuracy and speed.
// The same MLP, the same sharding code (one replica), the same optimizer
// formulas the PS applies (optim/optimizer.h).
#ifndef PSTRAIN_TRAIN_LOCAL_TRAINER_H_
#define PSTRAIN_TRAIN_LOCAL_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "client/parameter_store.h"
#include "cluster/placement.h"
#include "model/job_spec.h"
#include "train/local_table.h"

namespace pstrain::train {

struct LocalResult {
  int64_t steps = 0;  // the step reached (counted from the run's start, resumes included)
  double train_seconds = 0;
  double examples_per_sec = 0;
  // Where it computed: model::Backend::name(), "cpu" or "cuda".
  std::string backend;
  double test_accuracy = 0;
  double test_loss = 0;
  // Binary labels (sigmoid loss): the test split's ROC AUC.
  std::optional<double> test_auc;
  // Reading the training and test sets before the first step.
  double load_seconds = 0;
  // Of train_seconds, how long steps stood waiting for their batch.
  double input_wait_seconds = 0;
  // The test accuracy after each full epoch (as Keras's validation_data),
  // when the job runs by epochs; not counted in train_seconds.
  std::vector<double> epoch_test_accuracy;
  // The step the run started from: 0, or the checkpoint it resumed.
  int64_t resumed_step = 0;
  // The signal that stopped the run before its end (options.stop), or 0.
  int stopped_by = 0;
  std::vector<float> params;  // the trained values, flat (model::Network's layout)
  LocalTables tables;         // the trained embedding tables
};

// The replicas of a job without PS (the all-reduce mode): each runs RunLocal
// on its shard of the training data with its own copy of the model, and
// `wrap` gives it the store through which the replicas average their
// gradients (client/collective_store.h), so that every copy stays the same.
// Replica 0 (the chief) writes the run's files and scores the test split;
// every replica restores the newest checkpoint of the shared output
// directory. The replicas agree on the schedule (the fewest batches per
// epoch of any shard) and on the step they resume from, and check at the end
// that they hold the same bits. A replica that fails for good before the
// first step (its data, the run on disk) fails every replica in the same
// exchange, with its exit code (train/group_outcome.h), and replica 0
// records that failure in run.json. They end together too: no replica
// returns before replica 0 has written the job's end (the final
// checkpoint, final_metrics.json, run.json's end).
struct ReplicaGroup {
  int replica = 0;
  int num_replicas = 1;
  // The tasks behind the replicas ("chief:0", "worker:0", ...).
  std::vector<std::string> names;
  // This replica's own store of the model (`placement`'s variables laid out
  // by `offsets`) wrapped into the one the step loop trains on.
  std::function<std::unique_ptr<client::ParameterStore>(
      std::unique_ptr<client::ParameterStore> own, const Placement& placement,
      const std::vector<int64_t>& offsets)>
      wrap;
  // Every replica's `mine`, by replica.
  std::function<absl::StatusOr<std::vector<std::string>>(const std::string& mine)> all_gather;
  // The same for the exchange at the job's end, which waits while replica
  // 0 checkpoints and scores the test split (minutes for an image model on
  // a CPU): a neighbour may be silent for kEndWait. Unset: all_gather.
  static constexpr absl::Duration kEndWait = absl::Hours(2);
  std::function<absl::StatusOr<std::vector<std::string>>(const std::string& mine)> end_gather;
  // A failure for good in the step loop (a bad record in a streamed file, a
  // bug) is not this replica's alone: `announce` tells every other replica
  // (train/group_outcome.h's EncodeFailure text; returns once they all
  // know, or with why not), and a step loop that failed because another
  // replica announced its failure finds it in `told`: that replica's index
  // and text. Either may be null (a group of one).
  std::function<absl::Status(const std::string& failure)> announce;
  std::function<std::optional<std::pair<int, std::string>>()> told;
  // Agrees on stopping: takes this replica's stop signal (0: none) for the
  // next exchange and returns the signal the replicas agreed on in the last
  // one (0: go on), the same answer on every replica before the same step.
  // Null: each replica stops on its own signal.
  std::function<int(int mine)> stop_vote;
  // > 0: the wrapped store packs the exchanges (CollectiveOptions::
  // bytes_per_pack), so the step loop starts each layer's as soon as
  // backprop has produced its gradient; 0: the whole model after the step.
  int64_t bytes_per_pack = 0;
  // What run.json and final_metrics.json record of the mode ("allreduce").
  std::string mode = "allreduce";
};

struct LocalOptions {
  // A progress line (and, with an output directory, a summary) every so many steps.
  int log_every_steps = 400;
  // Where the run's files go, laid out as a cluster's chief lays them out:
  // run.json (job/run_record.h), checkpoints every job.checkpoint_every_secs
  // or _steps and at the end (train/local_checkpoint.h), final_metrics.json,
  // TensorBoard event files and JSON lines in train/ and eval/
  // (base/event_file.h). Empty: nothing is written.
  std::string output_dir;
  // What run.json records of the command line (job/run_info.h); the job's
  // settings and model are added here.
  Json run = Json::object();
  // Set to a signal's number to stop: the run checkpoints the step it has
  // reached and returns with `stopped_by` set. Null: runs to the end.
  const std::atomic<int>* stop = nullptr;
  // A replica of a job without PS; null: one process.
  const ReplicaGroup* group = nullptr;
};

// Trains job.epochs (or job.max_steps) over the whole training set, then
// scores the test set (and after each epoch, logging "epoch E/N: test
// accuracy ..."). Logs Keras-like progress lines. Errors for bad data, a bad
// model or optimizer.
//
// With an output directory: a directory whose run.json is of another model
// is refused before anything in it changes (FailedPrecondition naming each
// difference); one holding checkpoints resumes from the newest (a cluster's
// included), its data where that step left it; a run already at its last step
// is scored again. The test split is read before anything is written.
// run.json records how the run ended: "ok", the error that ended it, or the
// signal that stopped it.
absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, const LocalOptions& options);

// RunLocal writing nothing.
absl::StatusOr<LocalResult> RunLocal(const model::JobSpec& job, int log_every_steps = 400);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_LOCAL_TRAINER_H_
