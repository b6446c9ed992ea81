#include "job/flag_table.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace pstrain {
namespace {

constexpr int64_t kTwoTo20 = int64_t{1} << 20;
constexpr int64_t kTwoTo24 = int64_t{1} << 24;
constexpr int64_t kTwoTo30 = int64_t{1} << 30;
constexpr int64_t kTwoTo40 = int64_t{1} << 40;

FlagDef Flag(const char* name, FlagGroup group, const char* value, const char* default_value,
             const char* help, std::optional<int64_t> lo = std::nullopt,
             std::optional<int64_t> hi = std::nullopt) {
  return FlagDef{name, group, value, default_value, help, lo, hi};
}

std::vector<FlagDef> MakeTable() {
  using G = FlagGroup;
  return {
      // The job: every training task (chief, workers), train --local and
      // the tools that read a run (evaluate, predict, export, bench).
      Flag("model_config", G::kJob, "FILE.pbtxt", "",
           "the model, its input and job settings (configs/*.pbtxt); flags override its settings"),
      Flag("config", G::kJob, "FILE.pbtxt", "", "the same as --model_config"),
      Flag("hidden", G::kJob, "W1,W2,...", "128",
           "the widths of the default MLP's hidden layers (without --model_config)"),
      Flag("input_shape", G::kJob, "H,W,C", "",
           "the model's input shape in place of its config's (a Keras application's: "
           "224,224,3 unless given)"),
      Flag("alpha", G::kJob, "A", "",
           "MobileNetV2's width multiplier, in place of its config's (application "
           "mobilenet_v2), in (0, 4]"),
      Flag("classes", G::kJob, "N", "",
           "the last dense layer's units in place of its config's (a Keras application's "
           "softmax)",
           2, 65536),
      Flag("bn_momentum", G::kJob, "M", "",
           "every batch normalization's momentum in place of its config's, in [0, 1]"),
      Flag("data_dir", G::kJob, "DIR", "/usr/share/datasets/fashion-mnist",
           "where the data set's files are"),
      Flag("train_files", G::kJob, "GLOB", "", "the training files (TFRecord or CSV inputs)"),
      Flag("test_files", G::kJob, "GLOB", "", "the test files (TFRecord or CSV inputs)"),
      Flag("train_split", G::kJob, "SPLIT", "train",
           "a TensorFlow Datasets input's training split, sliced as TFDS slices (train[:80%])"),
      Flag("test_split", G::kJob, "SPLIT", "test",
           "a TensorFlow Datasets input's test split (train[80%:], say, for a set with only "
           "train)"),
      Flag("skip_bad_records", G::kJob, "", "false",
           "skip (count and log) records that cannot be read instead of failing"),
      Flag("batch_size", G::kJob, "N", "32", "examples per step of each replica", 1, 65536),
      Flag("epochs", G::kJob, "N", "2", "passes over each replica's shard", 1, 100000),
      Flag("max_steps", G::kJob, "N", "0", "steps per replica; 0: epochs decide", 0,
           std::nullopt),
      Flag("optimizer", G::kJob, "sgd|momentum|adagrad|adam|nadam|ftrl", "sgd",
           "the update the PS apply"),
      Flag("learning_rate", G::kJob, "X", "0.05", "the optimizer's step size, in (0, 100]"),
      Flag("momentum", G::kJob, "X", "0.9", "momentum, in [0, 1)"),
      Flag("nesterov", G::kJob, "", "false", "Nesterov momentum"),
      Flag("beta1", G::kJob, "X", "0.9", "Adam's and Nadam's beta1, in [0, 1)"),
      Flag("beta2", G::kJob, "X", "0.999", "Adam's and Nadam's beta2, in [0, 1)"),
      Flag("epsilon", G::kJob, "X", "1e-07", "Adam's, Nadam's and Adagrad's epsilon, > 0"),
      Flag("initial_accumulator", G::kJob, "X", "0.1", "Adagrad's and FTRL's, > 0"),
      Flag("l1", G::kJob, "X", "0", "FTRL's L1 strength, >= 0"),
      Flag("l2", G::kJob, "X", "0", "FTRL's L2 strength, >= 0"),
      Flag("seed", G::kJob, "N", "1", "initial values, shuffling and dropout", 0, std::nullopt),
      Flag("consistency", G::kJob, "async|sync|ssp:S", "async",
           "how the PS apply the replicas' gradients"),
      Flag("replicas_to_aggregate", G::kJob, "N", "0",
           "sync: gradients averaged per step; 0: every replica (more replicas: backups)", 0,
           4096),
      Flag("sync_wait_secs", G::kJob, "S", "120",
           "how long a replica waits for the others at a sync step or the ssp bound", 1, 86400),
      Flag("chief_trains", G::kJob, "", "true", "the chief trains as replica 0 beside its duties"),
      Flag("straggler", G::kJob, "TASK:MS[@P][,...]", "",
           "make a task (or all) sleep MS before a step, on a share P of steps"),
      Flag("device", G::kJob, "auto|cpu|cuda|cuda:N", "auto",
           "where replicas compute: CUDA when usable, else the CPU"),
      Flag("push_per_layer", G::kJob, "", "false",
           "push each layer's gradient as soon as backprop produces it"),
      Flag("bytes_per_pack", G::kJob, "auto|N", "auto",
           "without ps: all-reduce the gradients in packs of at least N bytes, each as soon as "
           "backprop has produced it; 0: the whole model in one pack after the step; auto: "
           "262144 when a link of the ring is TCP, else 0"),
      Flag("shared_memory", G::kJob, "", "true",
           "workers offer a PS on their host shared memory for tensor bytes (a PS refuses it "
           "with --noshared_memory), as do the replicas of a cluster without ps to their ring "
           "neighbours"),
      Flag("tcp_frames", G::kJob, "", "true",
           "exchange frames over the PS's TCP frame port (inside TLS when the job has it), "
           "else in gRPC; a PS offers no port with --notcp_frames"),
      Flag("wire_dtype", G::kJob, "float32|bfloat16", "float32",
           "gradients and values on the wire; the PS keep float32"),
      Flag("checkpoint_secs", G::kJob, "S", "60", "a checkpoint every S seconds; 0: off", 0,
           86400 * 7),
      Flag("checkpoint_steps", G::kJob, "N", "0", "a checkpoint every N global steps; 0: off", 0,
           std::nullopt),
      Flag("keep_checkpoints", G::kJob, "K", "5", "the newest K are kept", 1, 1000),
      Flag("output_dir", G::kJob, "DIR", "./output",
           "checkpoints, summaries, metrics (/data/output when TF_CONFIG's environment is "
           "cloud); one job at a time (its chief locks it); a ps or worker started after its "
           "job ended well there exits 0"),

      Flag("tls_cert", G::kSecurity, "PEM", "", "this task's certificate (mutual TLS)"),
      Flag("tls_key", G::kSecurity, "PEM", "", "its private key"),
      Flag("tls_ca", G::kSecurity, "PEM", "", "the CA that signs every task's certificate"),
      Flag("tls_server_name", G::kSecurity, "NAME", "",
           "the name every certificate carries, when not the hosts'"),
      Flag("token_file", G::kSecurity, "FILE", "",
           "a cluster token sent on every call (or PSTRAIN_TOKEN=...)"),
      Flag("insecure", G::kSecurity, "", "false",
           "run without TLS or a token where the cluster is not all loopback"),
      Flag("kernel_tls", G::kSecurity, "", "true",
           "frames inside TLS are sealed by the kernel (kTLS) where it has the tls module; "
           "false: by OpenSSL in the task"),

      Flag("bind", G::kPlatform, "HOST:PORT", "",
           "where the task listens (a PS's service, the chief's); TF_CONFIG's address"),
      Flag("work_dir", G::kPlatform, "DIR", "", "change into it first"),
      Flag("log_dir", G::kPlatform, "DIR", "", "also log to DIR/<type>-<index>.log"),
      Flag("log_to", G::kPlatform, "stderr|stdout|file", "stderr", "where log lines go"),
      Flag("num_gpus", G::kPlatform, "N", "",
           "as platforms pass it: 0, the CPU; N >= 1, CUDA where a device is usable", 0, 1024),

      Flag("max_message_mib", G::kPs, "N", "512", "the largest gRPC message", 1, 2047),
      Flag("max_calls_per_client", G::kPs, "N", "64", "calls in flight per client connection",
           1, kTwoTo20),
      Flag("max_calls", G::kPs, "N", "1024", "calls in flight in all", 1, kTwoTo20),
      Flag("max_tensors_per_request", G::kPs, "N", "65536", "tensors one frame names", 1,
           kTwoTo30),
      Flag("max_ids_per_request", G::kPs, "N", "1048576", "table ids one frame names", 1,
           kTwoTo40),
      Flag("max_table_rows", G::kPs, "N", "16777216", "rows one table may create on a PS", 1,
           kTwoTo40),
      Flag("stop_grace_secs", G::kPs, "S", "10",
           "on SIGTERM, serve this long for the chief's last checkpoint", 0, 3600),

      Flag("ps_wait_s", G::kTrainer, "S", "120",
           "how long a PS may be away before the job fails", 1, 86400 * 7),
      Flag("job_timeout_s", G::kTrainer, "S", "86400",
           "the longest the chief waits for the training replicas", 1, 86400 * 365),
      Flag("blas_threads", G::kTrainer, "N", "1",
           "compute threads of a training task, oneDNN's and OpenBLAS's (train --local: one per "
           "core unless given)",
           1, 256),
      Flag("eval_wait_secs", G::kTrainer, "S", "600",
           "with an evaluator, how long the chief waits for its score of the final checkpoint; "
           "0: not at all",
           0, 86400),

      Flag("eval_poll_secs", G::kEvaluator, "S", "2", "how often it looks for a new checkpoint",
           1, 3600),
      Flag("once", G::kEvaluator, "", "false", "score the newest checkpoint and exit"),
      Flag("idle_timeout_s", G::kEvaluator, "S", "86400",
           "stop when no new checkpoint came for that long", 1, 86400 * 365),
  };
}

const FlagDef& Find(absl::string_view name) {
  const FlagDef* f = FindFlag(name);
  if (f == nullptr) {
    // A reader of a flag the table lacks: a bug, caught by every test that
    // starts a task.
    std::fprintf(stderr, "pstrain: flag --%s is not in job/flag_table.cc\n",
                 std::string(name).c_str());
    std::abort();
  }
  return *f;
}

const char* Heading(FlagGroup group) {
  switch (group) {
    case FlagGroup::kJob:
      return "job flags (every training task, train --local, and the tools that read a run)";
    case FlagGroup::kSecurity:
      return "security flags (every task, launch, status)";
    case FlagGroup::kPlatform:
      return "platform flags (every task)";
    case FlagGroup::kPs:
      return "PS flags";
    case FlagGroup::kTrainer:
      return "chief and worker flags";
    case FlagGroup::kEvaluator:
      return "evaluator flags";
  }
  return "";
}

std::string Spelling(const FlagDef& f) {
  return *f.value == '\0' ? absl::StrCat("--[no]", f.name) : absl::StrCat("--", f.name, "=", f.value);
}

std::string Range(const FlagDef& f) {
  if (!f.lo.has_value() && !f.hi.has_value()) return "";
  if (!f.hi.has_value()) return absl::StrCat(">= ", *f.lo);
  return absl::StrCat(f.lo.value_or(0), "..", *f.hi);
}

}  // namespace

const std::vector<FlagDef>& FlagTable() {
  static const auto* table = new std::vector<FlagDef>(MakeTable());
  return *table;
}

const FlagDef* FindFlag(absl::string_view name) {
  for (const FlagDef& f : FlagTable()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

absl::StatusOr<int64_t> IntFlag(CliArgs& args, absl::string_view name,
                                std::optional<int64_t> fallback) {
  const FlagDef& f = Find(name);
  int64_t def = 0;
  if (fallback.has_value()) {
    def = *fallback;
  } else if (*f.default_value != '\0' && !absl::SimpleAtoi(f.default_value, &def)) {
    def = 0;
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t v, args.GetInt(name, def));
  if ((f.lo.has_value() && v < *f.lo) || (f.hi.has_value() && v > *f.hi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, "=", v, ": must be ",
        f.hi.has_value() ? absl::StrCat("in ", f.lo.value_or(0), "..", *f.hi)
                         : absl::StrCat(*f.lo, " or more")));
  }
  return v;
}

absl::StatusOr<double> DoubleFlag(CliArgs& args, absl::string_view name,
                                  std::optional<double> fallback) {
  const FlagDef& f = Find(name);
  double def = 0;
  if (fallback.has_value()) {
    def = *fallback;
  } else if (*f.default_value != '\0' && !absl::SimpleAtod(f.default_value, &def)) {
    def = 0;
  }
  return args.GetDouble(name, def);
}

absl::StatusOr<bool> BoolFlag(CliArgs& args, absl::string_view name,
                              std::optional<bool> fallback) {
  const FlagDef& f = Find(name);
  return args.GetBool(name, fallback.value_or(absl::string_view(f.default_value) == "true"));
}

absl::StatusOr<std::string> StringFlag(CliArgs& args, absl::string_view name,
                                       std::optional<std::string> fallback) {
  const FlagDef& f = Find(name);
  return args.GetString(name, fallback.has_value() ? *fallback : std::string(f.default_value));
}

std::string FlagUsage(FlagGroup group) {
  std::string out = absl::StrCat(Heading(group), ":\n");
  for (const FlagDef& f : FlagTable()) {
    if (f.group != group) continue;
    std::string line = absl::StrCat("  ", Spelling(f));
    if (*f.default_value != '\0') absl::StrAppend(&line, " (", f.default_value, ")");
    if (line.size() < 34) line.resize(34, ' ');
    else line += "\n" + std::string(34, ' ');
    absl::StrAppend(&out, line, f.help);
    const std::string range = Range(f);
    if (!range.empty()) absl::StrAppend(&out, " [", range, "]");
    out += "\n";
  }
  return out;
}

std::string TaskFlagUsage() {
  std::string out;
  for (FlagGroup g : {FlagGroup::kSecurity, FlagGroup::kPlatform, FlagGroup::kPs,
                      FlagGroup::kTrainer, FlagGroup::kEvaluator}) {
    out += FlagUsage(g);
  }
  return out;
}

std::string FlagReference() {
  std::string out =
      "# Flag reference\n\n"
      "Every flag a pstrain task reads, from the one table that defines them\n"
      "(`job/flag_table.cc`; `pstrain help flags` prints this page, and a test keeps\n"
      "it current). Every task accepts every flag below, so that one argument list\n"
      "serves every role; each logs the flags its role does not use, and refuses a\n"
      "flag no role knows, naming the nearest real one. Job flags given on the\n"
      "command line override the model config's settings.\n";
  for (FlagGroup g : {FlagGroup::kJob, FlagGroup::kSecurity, FlagGroup::kPlatform, FlagGroup::kPs,
                      FlagGroup::kTrainer, FlagGroup::kEvaluator}) {
    absl::StrAppend(&out, "\n## ", Heading(g), "\n\n| flag | default | range | what |\n",
                    "| --- | --- | --- | --- |\n");
    for (const FlagDef& f : FlagTable()) {
      if (f.group != g) continue;
      std::string spelling = Spelling(f);
      for (size_t at = spelling.find('|'); at != std::string::npos; at = spelling.find('|', at + 2)) {
        spelling.replace(at, 1, "\\|");
      }
      absl::StrAppend(&out, "| `", spelling, "` | ",
                      *f.default_value == '\0' ? "" : absl::StrCat("`", f.default_value, "`"),
                      " | ", Range(f), " | ", f.help, " |\n");
    }
  }
  return out;
}

}  // namespace pstrain
