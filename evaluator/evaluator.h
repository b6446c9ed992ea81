// The evaluator role: scores checkpoints from their files alone, never
// talking to the PS or anything training waits on. It polls the
// `checkpoint` index under the output directory (cluster/checkpoint_layout.h),
// loads each complete checkpoint it has not scored (CompleteCheckpoints, as
// the chief restores from), oldest first, up to the one the index names (its
// shards, every checksum verified, placed as the number of PS that wrote it
// places them), reassembles the dense variables in the model's flat layout,
// scores them on the test set and writes eval loss and accuracy as summaries
// (<output_dir>/eval, base/event_file.h). It skips steps it has scored
// (remembered in <output_dir>/eval/scored, across restarts) and exits after
// scoring the checkpoint the index marks final, or after one with `once`. A
// checkpoint that is incomplete or damaged is passed over with a log line
// naming the file and what is wrong; when it is the final one, that is an
// error (DataLoss).
#ifndef PSTRAIN_EVALUATOR_EVALUATOR_H_
#define PSTRAIN_EVALUATOR_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "data/dataset.h"
#include "model/backend.h"
#include "model/job_spec.h"
#include "train/local_table.h"

namespace pstrain::evaluator {

struct EvaluatorOptions {
  model::JobSpec job;
  std::string output_dir = "./output";
  absl::Duration poll = absl::Seconds(2);
  bool once = false;
  // How long to wait for the next checkpoint before giving up.
  absl::Duration idle_timeout = absl::Hours(24);
  // Asked at every poll (optional): a non-OK answer (the job failed for
  // good, as its record on disk says) ends the watch with it.
  std::function<absl::Status()> job_failure;
};

struct Score {
  int64_t step = 0;
  double loss = 0;
  double accuracy = 0;
  std::optional<double> auc;  // binary labels (sigmoid loss)
};

// The dense variables of checkpoint `step` under `dir`, flat (variable v at
// offsets[v]), from the shards of `placement`'s PS. When `tables` is not
// null, the rows of each of its embedding tables that every shard holds are
// set into it (rows never written keep their initial values). Errors name
// the file: ReadShard's, or DataLoss for a slice or table missing from its
// shard or of the wrong size, or a row id out of range.
absl::StatusOr<std::vector<float>> LoadCheckpointParams(const std::string& dir, int64_t step,
                                                        const Placement& placement,
                                                        const std::vector<int64_t>& offsets,
                                                        int64_t num_parameters,
                                                        train::LocalTables* tables = nullptr);

// Checkpoint `step` under `dir`, written by `num_ps` PS, in `net`'s layout:
// the dense values flat (LoadCheckpointParams) and every embedding table,
// rows the checkpoint lacks at their initial values from `seed`.
struct CheckpointValues {
  train::LocalTables tables;
  std::vector<float> params;
};
absl::StatusOr<CheckpointValues> LoadCheckpointValues(const model::Network& net, uint64_t seed,
                                                      const std::string& dir, int64_t step,
                                                      int num_ps);

// Scores checkpoint `step` under `dir`, written by `num_ps` PS, on `test`
// with `backend`'s network (embedding rows the checkpoint lacks take their
// initial values from `seed`). LoadCheckpointParams's errors.
absl::StatusOr<model::BatchResult> ScoreCheckpoint(model::Backend& backend, uint64_t seed,
                                                   const std::string& dir, int64_t step, int num_ps,
                                                   const data::Dataset& test);

// OK when `dir` holds no run.json (job/run_record.h) or one whose
// model is `net`'s with `job`'s optimizer; else FailedPrecondition naming
// each difference (an evaluator given other job flags than the chief).
absl::Status CheckRunModel(const std::string& dir, const model::Network& net,
                           const model::JobSpec& job);

// Runs until the final checkpoint is scored (or one, with `once`); returns
// the scores written, in order.
absl::StatusOr<std::vector<Score>> RunEvaluator(const EvaluatorOptions& options);

}  // namespace pstrain::evaluator

#endif  // PSTRAIN_EVALUATOR_EVALUATOR_H_
