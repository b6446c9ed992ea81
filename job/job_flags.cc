#include "job/job_flags.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cluster/consistency.h"
#include "base/status_macros.h"
#include "job/flag_table.h"
#include "model/cuda_device.h"
#include "model/model_config.h"

namespace pstrain {

const std::vector<std::string>& JobFlagNames() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>();
    for (const FlagDef& f : FlagTable()) {
      if (f.group == FlagGroup::kJob) out->push_back(f.name);
    }
    return out;
  }();
  return *names;
}

absl::Status CheckStragglers(const model::JobSpec& job, const ClusterSpec& cluster) {
  const std::vector<TaskId> replicas = TrainingReplicas(cluster, job.chief_trains);
  std::vector<std::string> names;
  for (const TaskId& t : replicas) names.push_back(t.ToString());
  for (const auto& [task, straggler] : job.stragglers) {
    if (task == "all" || absl::c_linear_search(names, task)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("--straggler names ", task, ", which is not a training task of this cluster (",
                     absl::StrJoin(names, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTableUpdates(const model::JobSpec& job, const ClusterSpec& cluster) {
  if (!job.optimizer.dense_table_updates || cluster.ps.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "optimizer.table_updates: dense is for tables held where the replicas train (train "
      "--local, a cluster without ps); the ps of this cluster move only the rows a push names "
      "(lazy): leave it out, or train without ps");
}

std::string JobFlagsUsage() { return FlagUsage(FlagGroup::kJob); }

absl::Status ReadModelOverrides(CliArgs& args, model::DataSizes* sizes) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string shape, StringFlag(args, "input_shape", ""));
  if (!shape.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(sizes->input_shape, model::ParseShapeFlag("input_shape", shape));
  }
  if (args.Has("alpha")) {
    PSTRAIN_ASSIGN_OR_RETURN(sizes->alpha, DoubleFlag(args, "alpha", 1.0));
    if (!(sizes->alpha > 0 && sizes->alpha <= 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--alpha=", sizes->alpha, ": must be in (0, 4]"));
    }
  }
  if (args.Has("classes")) {
    PSTRAIN_ASSIGN_OR_RETURN(sizes->classes, IntFlag(args, "classes"));
    sizes->replace_classes = true;
  }
  if (args.Has("bn_momentum")) {
    PSTRAIN_ASSIGN_OR_RETURN(sizes->bn_momentum, DoubleFlag(args, "bn_momentum", 0.99));
    if (!(sizes->bn_momentum >= 0 && sizes->bn_momentum <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--bn_momentum=", sizes->bn_momentum, ": must be in [0, 1]"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The model config's job (--model_config or --config), or the defaults.
absl::StatusOr<model::JobSpec> ConfigJob(CliArgs& args, const ConfigText* recorded,
                                         const model::DataSizes* given_sizes,
                                         std::string* config) {
  model::JobSpec job;
  // A model config sets the model and the job settings it states; flags
  // given as well override those settings.
  PSTRAIN_ASSIGN_OR_RETURN(*config, StringFlag(args, "model_config"));
  // --config is the short name `pstrain launch --config FILE` users expect.
  PSTRAIN_ASSIGN_OR_RETURN(std::string short_config, StringFlag(args, "config"));
  if (!short_config.empty() && !config->empty()) {
    return absl::InvalidArgumentError("--config and --model_config both name a file: use one");
  }
  if (config->empty()) *config = short_config;
  const bool from_record = config->empty() && recorded != nullptr;
  if (from_record) *config = recorded->name;
  if (config->empty()) return job;
  // What the data says of the sizes a config may leave out: read where
  // the job reads its data.
  PSTRAIN_ASSIGN_OR_RETURN(const std::string data_dir, StringFlag(args, "data_dir", job.data_dir));
  model::DataSizes sizes = given_sizes != nullptr ? *given_sizes : model::DataSizesOf(data_dir);
  // A Keras application's input is fitted to the images the job reads.
  if (given_sizes == nullptr) {
    sizes.data_shape = model::IdxImageShapeOf(data_dir);
    sizes.data_dir = data_dir;
  }
  PSTRAIN_RETURN_IF_ERROR(ReadModelOverrides(args, &sizes));
  PSTRAIN_ASSIGN_OR_RETURN(
      model::ModelConfigFile file,
      from_record ? model::ParseModelConfigFile(recorded->text, recorded->name, sizes)
                  : model::LoadModelConfigFile(*config, sizes));
  if (!file.trainable) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model_config=", *config,
        ": the file lists variables but no layers, so there is no model to train (it is "
        "for `pstrain placement --config`)"));
  }
  if (args.Has("hidden")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hidden and --model_config=", *config, " both give the layers: use one"));
  }
  return file.job;
}

// The data directory and the input's files and policy; its features come
// from the config.
absl::Status ReadInputFlags(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(job.data_dir, StringFlag(args, "data_dir", job.data_dir));
  data::InputSpec& input = job.input;
  PSTRAIN_ASSIGN_OR_RETURN(input.train_files, StringFlag(args, "train_files", input.train_files));
  PSTRAIN_ASSIGN_OR_RETURN(input.test_files, StringFlag(args, "test_files", input.test_files));
  PSTRAIN_ASSIGN_OR_RETURN(input.train_split, StringFlag(args, "train_split", input.train_split));
  PSTRAIN_ASSIGN_OR_RETURN(input.test_split, StringFlag(args, "test_split", input.test_split));
  PSTRAIN_ASSIGN_OR_RETURN(input.skip_bad_records,
                           BoolFlag(args, "skip_bad_records", input.skip_bad_records));
  if (input.format == data::InputFormat::kIdx &&
      (args.Has("train_files") || args.Has("test_files"))) {
    return absl::InvalidArgumentError(
        "--train_files and --test_files name TFRecord or CSV files, whose features the "
        "model config's input block gives (format: tfrecord, csv or tsv); this job "
        "reads IDX files");
  }
  if (input.format != data::InputFormat::kTfds &&
      (args.Has("train_split") || args.Has("test_split"))) {
    return absl::InvalidArgumentError(
        "--train_split and --test_split slice a TensorFlow Datasets directory's splits "
        "(the model config's input block says format: tfds); this job reads files");
  }
  if (input.format == data::InputFormat::kTfds &&
      (args.Has("train_files") || args.Has("test_files"))) {
    return absl::InvalidArgumentError(
        "--train_files and --test_files name files; this job reads a TensorFlow Datasets "
        "directory (format: tfds), whose splits --train_split and --test_split choose");
  }
  return absl::OkStatus();
}

absl::Status ReadOptimizerFlags(CliArgs& args, OptimizerSpec& opt) {
  PSTRAIN_ASSIGN_OR_RETURN(opt.name, StringFlag(args, "optimizer", opt.name));
  PSTRAIN_ASSIGN_OR_RETURN(double lr, DoubleFlag(args, "learning_rate", opt.learning_rate));
  PSTRAIN_ASSIGN_OR_RETURN(double momentum, DoubleFlag(args, "momentum", opt.momentum));
  PSTRAIN_ASSIGN_OR_RETURN(opt.nesterov, BoolFlag(args, "nesterov", opt.nesterov));
  PSTRAIN_ASSIGN_OR_RETURN(double beta1, DoubleFlag(args, "beta1", opt.beta1));
  PSTRAIN_ASSIGN_OR_RETURN(double beta2, DoubleFlag(args, "beta2", opt.beta2));
  PSTRAIN_ASSIGN_OR_RETURN(double epsilon, DoubleFlag(args, "epsilon", opt.epsilon));
  PSTRAIN_ASSIGN_OR_RETURN(double init_acc,
                           DoubleFlag(args, "initial_accumulator", opt.initial_accumulator));
  PSTRAIN_ASSIGN_OR_RETURN(double l1, DoubleFlag(args, "l1", opt.l1));
  PSTRAIN_ASSIGN_OR_RETURN(double l2, DoubleFlag(args, "l2", opt.l2));
  if (!(lr > 0) || lr > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate=", lr, ": must be in (0, 100]"));
  }
  if (opt.name != "sgd" && opt.name != "momentum" && opt.name != "adagrad" && opt.name != "adam" &&
      opt.name != "nadam" && opt.name != "ftrl") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer=", opt.name, ": must be sgd, momentum, adagrad, adam, nadam or ftrl"));
  }
  if (!(l1 >= 0) || !(l2 >= 0) || !std::isfinite(l1) || !std::isfinite(l2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--l1=", l1, " --l2=", l2, ": each must be 0 or more"));
  }
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--momentum=", momentum, ": must be in [0, 1)"));
  }
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--beta1=", beta1, " --beta2=", beta2, ": each must be in [0, 1)"));
  }
  if (!(epsilon > 0) || !(init_acc > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--epsilon=", epsilon, " --initial_accumulator=", init_acc, ": each must be positive"));
  }
  opt.learning_rate = static_cast<float>(lr);
  opt.momentum = static_cast<float>(momentum);
  opt.beta1 = static_cast<float>(beta1);
  opt.beta2 = static_cast<float>(beta2);
  opt.epsilon = static_cast<float>(epsilon);
  opt.initial_accumulator = static_cast<float>(init_acc);
  opt.l1 = static_cast<float>(l1);
  opt.l2 = static_cast<float>(l2);
  return absl::OkStatus();
}

// The schedule, the consistency mode and the checkpoints.
absl::Status ReadScheduleFlags(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(int64_t batch, IntFlag(args, "batch_size", job.batch_size));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t epochs, IntFlag(args, "epochs", job.epochs));
  PSTRAIN_ASSIGN_OR_RETURN(job.max_steps, IntFlag(args, "max_steps", job.max_steps));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t seed, IntFlag(args, "seed", static_cast<int64_t>(job.seed)));
  job.batch_size = static_cast<int>(batch);
  job.epochs = static_cast<int>(epochs);
  job.seed = static_cast<uint64_t>(seed);
  PSTRAIN_ASSIGN_OR_RETURN(std::string consistency,
                           StringFlag(args, "consistency", job.consistency.ToString()));
  auto mode = ParseConsistency(consistency);
  if (!mode.ok()) return absl::InvalidArgumentError(absl::StrCat("--", mode.status().message()));
  job.consistency = *mode;
  // A sync job's embedding tables take its rounds too, so that it trains as
  // one process with the replicas' batches together would.
  job.model.sync_tables = mode->sync();
  PSTRAIN_ASSIGN_OR_RETURN(int64_t aggregate,
                           IntFlag(args, "replicas_to_aggregate", job.replicas_to_aggregate));
  job.replicas_to_aggregate = static_cast<int>(aggregate);
  PSTRAIN_ASSIGN_OR_RETURN(int64_t sync_wait, IntFlag(args, "sync_wait_secs", job.sync_wait_secs));
  job.sync_wait_secs = static_cast<int>(sync_wait);
  PSTRAIN_ASSIGN_OR_RETURN(job.chief_trains, BoolFlag(args, "chief_trains", job.chief_trains));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t ckpt_secs,
                           IntFlag(args, "checkpoint_secs", job.checkpoint_every_secs));
  PSTRAIN_ASSIGN_OR_RETURN(job.checkpoint_every_steps,
                           IntFlag(args, "checkpoint_steps", job.checkpoint_every_steps));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t keep, IntFlag(args, "keep_checkpoints", job.keep_checkpoints));
  job.checkpoint_every_secs = static_cast<int>(ckpt_secs);
  job.keep_checkpoints = static_cast<int>(keep);
  return absl::OkStatus();
}

// How the replicas reach the PS.
absl::Status ReadTransportFlags(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(job.push_per_layer,
                           BoolFlag(args, "push_per_layer", job.push_per_layer));
  PSTRAIN_ASSIGN_OR_RETURN(std::string pack, StringFlag(args, "bytes_per_pack"));
  if (pack == "auto") {
    job.bytes_per_pack = -1;
  } else if (!absl::SimpleAtoi(pack, &job.bytes_per_pack) || job.bytes_per_pack < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bytes_per_pack=", pack, ": must be auto or a number of bytes (0 or more)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(job.shared_memory, BoolFlag(args, "shared_memory", job.shared_memory));
  PSTRAIN_ASSIGN_OR_RETURN(job.tcp_frames, BoolFlag(args, "tcp_frames", job.tcp_frames));
  PSTRAIN_ASSIGN_OR_RETURN(std::string wire_dtype, StringFlag(args, "wire_dtype"));
  if (wire_dtype != "float32" && wire_dtype != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire_dtype=", wire_dtype, ": must be float32 or bfloat16"));
  }
  job.bfloat16_wire = wire_dtype == "bfloat16";
  return absl::OkStatus();
}

// --straggler=TASK:MS[@P][,...]: TASK is worker:1, chief:0, ... or "all".
absl::Status ReadStragglers(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string straggler, StringFlag(args, "straggler"));
  for (absl::string_view part : absl::StrSplit(straggler, ',', absl::SkipEmpty())) {
    model::JobSpec::Straggler s;
    absl::string_view spec = part;
    const size_t at = spec.find('@');
    bool ok = true;
    if (at != absl::string_view::npos) {
      ok = absl::SimpleAtod(spec.substr(at + 1), &s.probability) && s.probability > 0 &&
           s.probability <= 1;
      spec = spec.substr(0, at);
    }
    const size_t colon = spec.rfind(':');
    std::string task;
    if (ok && colon != absl::string_view::npos) {
      if (spec.substr(0, colon) == "all") {
        task = "all";
      } else if (auto id = ParseTaskName(spec.substr(0, colon)); id.ok()) {
        task = id->ToString();
      }
    }
    if (task.empty() || !absl::SimpleAtoi(spec.substr(colon + 1), &s.ms) || s.ms < 0 ||
        s.ms > 60000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--straggler=", straggler, ": \"", part,
          "\" is not TASK:MS[@P] (a task such as worker:1 or chief:0, or all; 0..60000 ms; a "
          "probability per step in (0, 1])"));
    }
    job.stragglers[task] = s;
  }
  return absl::OkStatus();
}

// --device, and --num_gpus as platforms pass it.
absl::Status ReadDeviceFlags(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string device, StringFlag(args, "device", job.device.ToString()));
  auto parsed = model::ParseDevice(device);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", device, ": must be auto, cpu, cuda or cuda:N"));
  }
  job.device = *parsed;
  if (!args.Has("num_gpus")) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(int64_t gpus, IntFlag(args, "num_gpus", 0));
  const bool cpu = gpus == 0;
  const model::Device::Kind kind = job.device.kind;
  if (args.Has("device") &&
      (kind == model::Device::Kind::kCuda ? cpu : kind == model::Device::Kind::kCpu && !cpu)) {
    return absl::InvalidArgumentError(absl::StrCat("--num_gpus=", gpus, " and --device=",
                                                   job.device.ToString(), " disagree: give one"));
  }
  if (cpu) job.device = model::Device::Cpu();
  job.num_gpus = static_cast<int>(gpus);
  return absl::OkStatus();
}

// --hidden's widths: the default MLP's layers.
absl::Status ReadHiddenFlag(CliArgs& args, model::JobSpec& job) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string hidden, StringFlag(args, "hidden"));
  std::vector<int> widths;
  for (absl::string_view part : absl::StrSplit(hidden, ',', absl::SkipEmpty())) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1 || width > 65536) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden=", hidden, ": \"", part, "\" is not a layer width in 1..65536"));
    }
    widths.push_back(width);
  }
  job.model = model::NetworkSpec::FromWidths(job.model.input_dim, widths, job.model.num_classes());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<model::JobSpec> JobSpecFromFlags(CliArgs& args, const ConfigText* recorded,
                                                const model::DataSizes* sizes) {
  std::string config;
  PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, ConfigJob(args, recorded, sizes, &config));
  PSTRAIN_RETURN_IF_ERROR(ReadInputFlags(args, job));
  PSTRAIN_RETURN_IF_ERROR(ReadScheduleFlags(args, job));
  PSTRAIN_RETURN_IF_ERROR(ReadOptimizerFlags(args, job.optimizer));
  PSTRAIN_RETURN_IF_ERROR(ReadTransportFlags(args, job));
  PSTRAIN_RETURN_IF_ERROR(ReadStragglers(args, job));
  PSTRAIN_RETURN_IF_ERROR(ReadDeviceFlags(args, job));
  if (config.empty()) PSTRAIN_RETURN_IF_ERROR(ReadHiddenFlag(args, job));
  return job;
}

std::string DevicePlan(const model::JobSpec& job) {
  if (job.num_gpus < 0) return "";
  if (job.num_gpus == 0) return "--num_gpus=0: training on the CPU";
  auto devices = model::ListCudaDevices();
  if (!devices.ok() || devices->empty()) {
    return absl::StrCat("--num_gpus=", job.num_gpus, ": ", model::DescribeCuda(),
                        job.device.kind == model::Device::Kind::kCuda ? "" : "; training on the CPU");
  }
  return absl::StrCat("--num_gpus=", job.num_gpus, ": training on CUDA device 0 (",
                      (*devices)[0].name, ") of ", devices->size(),
                      job.num_gpus > 1 || devices->size() > 1
                          ? "; a task trains on one device: run one worker per GPU"
                          : "");
}

absl::StatusOr<std::string> OutputDirFromFlags(CliArgs& args, const std::string& environment) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::string dir,
      args.GetString("output_dir", environment == "cloud" ? "/data/output" : "./output"));
  if (dir.empty()) return absl::InvalidArgumentError("--output_dir is empty");
  return dir;
}

}  // namespace pstrain
