// The flags that describe a training job, shared by the chief, the workers
// and `pstrain launch` (which passes them on to each). Main-layer code only.
#ifndef PSTRAIN_JOB_JOB_FLAGS_H_
#define PSTRAIN_JOB_JOB_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli_args.h"
#include "cluster/tf_config.h"
#include "model/job_spec.h"
#include "model/model_config.h"

namespace pstrain {

// Names of the job flags: data_dir, batch_size, epochs, max_steps,
// learning_rate, optimizer (and its hyper-parameters), seed, hidden,
// consistency, replicas_to_aggregate, model_config, device, num_gpus,
// push_per_layer,
// checkpoint_secs, checkpoint_steps, keep_checkpoints, chief_trains,
// sync_wait_secs, config (= model_config), output_dir.
const std::vector<std::string>& JobFlagNames();

// --input_shape, --alpha, --classes and --bn_momentum, the model config's overrides
// (model::DataSizes), into *sizes; InvalidArgument naming a bad value.
absl::Status ReadModelOverrides(CliArgs& args, model::DataSizes* sizes);

// Reads the job flags into a JobSpec (defaults from model/job_spec.h, or
// from the file --model_config names: its layers and the settings it states,
// which the other flags override). --hidden is a comma-separated list of
// layer widths ("256,256"; "" for softmax regression) for the default MLP.
// InvalidArgument naming the flag for a value that does not parse or is out
// of range, the config file's own errors (model/model_config.h), a config
// without layers, or --hidden given with --model_config.
//
// `recorded`, when given, is a model config's text read in place of a file
// when neither --model_config nor --config is given (what a run's run.json
// records: job/run_settings.h); its `name` stands for the path in messages.
//
// Sizes a config leaves out come from the data (model/model_config.h,
// DataSizes): a vocab.txt and labels.txt in --data_dir. `sizes`, when
// given, replaces those and the config's own (`pstrain summary
// --vocabulary=N --classes=K`).
struct ConfigText {
  std::string text;
  std::string name;
};
absl::StatusOr<model::JobSpec> JobSpecFromFlags(CliArgs& args,
                                                const ConfigText* recorded = nullptr,
                                                const model::DataSizes* sizes = nullptr);

// InvalidArgument when a --straggler names a task that does not train in
// `cluster` ("--straggler names worker:7, which is not a training task of
// this cluster (chief:0, worker:0, worker:1)"). `chief_trains` as the job.
absl::Status CheckStragglers(const model::JobSpec& job, const ClusterSpec& cluster);

// InvalidArgument when `job`'s optimizer asks for dense table updates
// (OptimizerSpec::dense_table_updates) and `cluster` has ps, whose tables
// update lazily: "table_updates: dense is for tables held where the
// replicas train (train --local, a cluster without ps); ...".
absl::Status CheckTableUpdates(const model::JobSpec& job, const ClusterSpec& cluster);

// One log line saying where a replica of `job` trains given --num_gpus
// (a device, or the CPU and why); "" when --num_gpus was not given.
std::string DevicePlan(const model::JobSpec& job);

// --output_dir, defaulting to /data/output when TF_CONFIG's environment is
// "cloud", else ./output.
absl::StatusOr<std::string> OutputDirFromFlags(CliArgs& args,
                                               const std::string& environment);

// One-line usage text for the job flags.
std::string JobFlagsUsage();

}  // namespace pstrain

#endif  // PSTRAIN_JOB_JOB_FLAGS_H_
