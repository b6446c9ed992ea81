// The runs of `pstrain experiment`: the consistency modes it compares,
// what each finished run left on disk (final_metrics.json and the
// evaluator's eval/scalars.jsonl), and the tables written from them.
// Pure functions over text and files.
#ifndef PSTRAIN_EXPERIMENT_RUNS_H_
#define PSTRAIN_EXPERIMENT_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::experiment {

// A consistency mode as the experiment names it, and the job flags it sets.
struct ExperimentMode {
  std::string name;                // "sync+backup:1"
  std::string dir;                 // "sync_backup_1": a file-name-safe form
  std::vector<std::string> flags;  // "--consistency=sync", ...
  int num_ps = -1;                 // the experiment's --ps when -1; "allreduce": 0
};

// Parses "async", "sync", "sync+backup:K" (sync aggregating replicas - K
// gradients per step, K backups), "ssp:S" and "allreduce" (the same
// replicas with no PS, averaging gradients by ring all-reduce).
// InvalidArgument naming the mode for anything else or K out of
// 1..replicas-1.
absl::StatusOr<ExperimentMode> ParseExperimentMode(const std::string& mode, int replicas);

// Staleness from a PS histogram (buckets 0, 1, 2, 3-4, 5-8, ..., 65+):
// the mean, counting each bucket at its midpoint, and the bucket's upper
// bound at which 99% of the counts are reached.
struct StalenessSummary {
  double mean = 0;
  double p99 = 0;
};
StalenessSummary SummarizeStaleness(const std::vector<double>& histogram);

struct EvalPoint {
  double wall_s = 0;  // since the run started
  int64_t step = 0;
  double loss = 0;
  double accuracy = 0;
};

struct ExperimentRun {
  std::string mode;
  int repeat = 0;
  std::vector<EvalPoint> evals;  // by step
  double seconds = 0;            // the launch, start to end
  double test_accuracy = 0;
  double examples_per_sec = 0;
  double ms_per_step = 0;  // replica 0's seconds over its steps
  double dropped = 0;
  std::vector<double> staleness;  // histogram
  double time_to_target = -1;     // -1: never reached
  // Training examples per global step (examples over global_step): a sync
  // step is every replica's batch, an async one a single replica's.
  double examples_per_step = 0;
};

// What a finished run left in `dir` (its output directory), into *run:
// the metrics, and each evaluation with its wall time since `start_unix`;
// time_to_target is the first evaluation at or above `target`. The read
// or parse error of either file.
absl::Status ReadRun(const std::string& dir, double start_unix, double target, ExperimentRun* run);

// runs.csv: one row per evaluation of every run.
std::string RunsCsv(const std::vector<ExperimentRun>& runs);

// summary.md's table: per mode, medians over its runs.
std::string SummaryTable(const std::vector<ExperimentMode>& modes,
                         const std::vector<ExperimentRun>& runs, double target);

}  // namespace pstrain::experiment

#endif  // PSTRAIN_EXPERIMENT_RUNS_H_
