// pstrain: the single entry point.
//   pstrain placement / status   inspect a job
//   pstrain [flags]            run the task TF_CONFIG names (ps, worker, chief)
//   pstrain describe [--json]  show what TF_CONFIG says
//   pstrain launch ...         a whole cluster on this machine
//   pstrain help
#include "cli/pstrain_main.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/build_info.h"
#include "cli/checkpoint_tools.h"
#include "cli/data_tool.h"
#include "cli/describe.h"
#include "cli/experiment.h"
#include "cli/launch.h"
#include "cli/plan.h"
#include "cli/role_main.h"
#include "cli/tfconfig.h"
#include "cli/tools.h"
#include "cli/train_bench.h"
#include "base/cli_args.h"
#include "base/crash_handler.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/malloc_tuning.h"
#include "base/signals.h"
#include "cluster/tf_config.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_settings.h"
#include "launcher/supervise.h"
#include "job/run_info.h"
#include "model/blas_kernels.h"
#include "model/compute_threads.h"
#include "model/cuda_device.h"
#include "train/local_trainer.h"
#include "transport/frame_socket.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  pstrain [flags]              run the task named by $TF_CONFIG\n"
    "  pstrain describe [--json]    print this task and the cluster from $TF_CONFIG\n"
    "  pstrain launch [--ps N] [--workers M] [--nochief] [--evaluator] [--output_dir DIR]\n"
    "                 [--timeout_s S (0: no bound)] [job flags]\n"
    "                               start a whole cluster on 127.0.0.1 and train\n"
    "                               (--ps 0: no ps, the replicas all-reduce)\n"
    "  pstrain train --local [job flags]\n"
    "                               the same model and data in this one process, no PS\n"
    "  pstrain placement --ps N [--config FILE | job flags] [--min_slice_bytes B] [--json]\n"
    "                               which slice of which variable goes to which PS\n"
    "  pstrain summary [--config FILE | job flags] [--ps N] [--vocabulary N] [--classes K]\n"
    "                               the model's layers, output shapes and parameter\n"
    "                               counts (Keras's model.summary()) and where each\n"
    "                               variable lives on N PS\n"
    "  pstrain inspect DIR [--json]  a checkpoint's variables, rows, optimizer slots,\n"
    "                               step and checksums (DIR: an output directory or\n"
    "                               a ckpt-<step> in it)\n"
    "  pstrain evaluate --checkpoint DIR [job flags]\n"
    "                               a checkpoint's loss and accuracy on the test split\n"
    "  pstrain predict --checkpoint DIR --out FILE [--input GLOB | --images GLOB,...] [job "
    "flags]\n"
    "                               each example's prediction and probabilities (CSV\n"
    "                               for FILE.csv, else JSON lines)\n"
    "  pstrain export --checkpoint DIR --out FILE.npz|FILE.onnx [--format=npz|onnx]\n"
    "                  [job flags]  the model as NumPy's .npz (an array per variable)\n"
    "                               or as ONNX (opset 13)\n"
    "  pstrain bench [--steps N] [--repeat R] [--certs DIR] [--cuda_only] [job flags]\n"
    "                               examples/s of train --local and of 1-PS clusters\n"
    "                               against the sgemm limit of this machine; on a CUDA\n"
    "                               device, steps against their cuBLAS-only time\n"
    "  pstrain experiment [--config FILE] [--modes async,sync,sync+backup:1,ssp:2,allreduce]\n"
    "                 [--workers N] [--ps M] [--straggler TASK:MS[@P]] [--repeats R] [--target "
    "ACC]\n"
    "                 [job flags]\n"
    "                               the same job once per mode (allreduce: no PS), compared\n"
    "                               (CSV, Markdown table, PNG plots)\n"
    "  pstrain plan --model-bytes B --workers N --bandwidth GBPS [--step-ms T] [--max-ps K]\n"
    "               [--measure]\n"
    "                               how many PS: predicted step time per PS count against\n"
    "                               a ring all-reduce; --measure compares with this machine\n"
    "  pstrain tfconfig uai --nodes H0,H1,... [--ps-port P] [--worker-port W] [--out DIR]\n"
    "                               the TF_CONFIG of every task of a UAI-Train-style job\n"
    "  pstrain data shard --data_dir=DIR --out=DIR --files=N\n"
    "  pstrain data to-tfrecord --data_dir=DIR --out=DIR [--files=N] [--compression=GZIP|NONE]\n"
    "                 [--image_encoding=floats|raw|png]\n"
    "                               a copy of the data set with its training split in N\n"
    "                               files, which replicas then shard by file; images as\n"
    "                               floats, raw bytes (image_raw) or PNG (as TFDS stores them)\n"
    "  pstrain data to-csv --data_dir=DIR --out=DIR\n"
    "                               the data set as CSV (label, pixel1..pixel784)\n"
    "  pstrain data csv-to-tfrecord --model_config=FILE --out=DIR [--data_dir=DIR]\n"
    "                               [--compression=GZIP|NONE] [--skip_bad_records]\n"
    "                               the CSV/TSV files of a config's input block as\n"
    "                               TFRecord files of tf.train.Example\n"
    "  pstrain data text-to-tfrecord --train=FILE [--test=FILE] --out=DIR [--vocab_size=N]\n"
    "                               [--files=N] [--compression=GZIP|NONE]\n"
    "                               label<TAB>text lines as token ids (vocab.txt, labels.txt)\n"
    "  pstrain data debian-descriptions --out=DIR [--vocab_size=N] [--files=N] [--min_class=N]\n"
    "                               Debian's package descriptions by section, a text\n"
    "                               classification corpus from apt's index files\n"
    "  pstrain data inspect --files=PATTERN [--data_dir=DIR] [--records=N]\n"
    "                               what your TFRecord files hold, feature by feature,\n"
    "                               and the config's input block that reads them\n"
    "  pstrain status [--ps HOST:PORT,...] [--json] [security flags]\n"
    "                               per PS and variable: bytes, pushes, pulls, step,\n"
    "                               dropped gradients, staleness; refused calls\n"
    "  pstrain supervise [--restarts N] -- [task flags]\n"
    "                               run the task of $TF_CONFIG and restart it in place\n"
    "                               after a retryable exit (128-255), at most N times;\n"
    "                               1-127 end it at once (a container's entrypoint)\n"
    "  pstrain version | --version  version, commit, build type and CUDA of this binary\n"
    "  pstrain help [flags]         this text; with flags, the reference of every flag\n"
    "  (--version, -V, --help and -h also work after any command and among a task's flags)\n"
    "\n"
    "Every task accepts every flag of every role below (`pstrain help flags`, or\n"
    "docs/flags.md, has them all), so that one argument list serves every role;\n"
    "each logs the flags its role does not use.\n"
    "\n"
    "TF_CONFIG: {\"cluster\": {\"chief\": [\"host:port\"], \"ps\": [...], \"worker\": [...]},\n"
    "            \"task\": {\"type\": \"ps\", \"index\": 0}}\n";

// Example command lines, one per command, for its --help.
const std::map<std::string, std::string>& Examples() {
  static const auto* examples = new std::map<std::string, std::string>{
      {"describe", "TF_CONFIG='{...}' pstrain describe --json"},
      {"launch",
       "pstrain launch --ps=2 --workers=2 --evaluator --model_config=configs/"
       "fashion_mnist_mlp.pbtxt --epochs=3 --output_dir=/tmp/run"},
      {"train", "pstrain train --local --model_config=configs/fashion_mnist_mlp.pbtxt --epochs=3"},
      {"placement", "pstrain placement --ps=4 --model_config=configs/click_model.pbtxt"},
      {"summary", "pstrain summary --model_config=configs/text_cnn.pbtxt --ps=2"},
      {"inspect", "pstrain inspect ./output/quickstart"},
      {"evaluate", "pstrain evaluate --checkpoint ./output/quickstart/ckpt-3750"},
      {"predict", "pstrain predict --checkpoint ./output/quickstart --out /tmp/predictions.csv"},
      {"export", "pstrain export --checkpoint ./output/quickstart --out /tmp/model.npz"},
      {"bench", "pstrain bench --model_config=configs/fashion_mnist_bag.pbtxt --steps=1000"},
      {"experiment", "pstrain experiment --modes=async,sync --workers=2 --epochs=2"},
      {"plan", "pstrain plan --model-bytes=400000000 --workers=64 --bandwidth=10"},
      {"tfconfig", "pstrain tfconfig uai --nodes=10.0.0.1,10.0.0.2 --out=/tmp/tf_configs"},
      {"data",
       "pstrain data to-tfrecord --data_dir=/usr/share/datasets/fashion-mnist --out=/tmp/tfr"},
      {"status", "pstrain status --ps=127.0.0.1:4000,127.0.0.1:4001"},
      {"version", "pstrain --version"},
      {"supervise", "TF_CONFIG='{...}' pstrain supervise --restarts=3 -- --epochs=2"},
  };
  return *examples;
}

// Commands whose flags include the job flags (JobFlagsUsage).
bool TakesJobFlags(const std::string& cmd) {
  return cmd == "launch" || cmd == "train" || cmd == "placement" || cmd == "summary" ||
         cmd == "evaluate" || cmd == "predict" || cmd == "export" || cmd == "bench" ||
         cmd == "experiment";
}

// `cmd`'s part of kUsage: its lines (every sub-command's for `data`), its
// example, and the job flags where it takes them.
std::string CommandUsage(const std::string& cmd) {
  std::string out = "usage:\n";
  const std::string self = "  pstrain " + cmd;
  bool in = false;
  for (absl::string_view line : absl::StrSplit(kUsage, '\n')) {
    if (absl::StartsWith(line, "  pstrain ") || line.empty()) {
      in = line == self || absl::StartsWith(line, self + " ");
    }
    if (in) absl::StrAppend(&out, line, "\n");
  }
  auto example = Examples().find(cmd);
  if (example != Examples().end()) absl::StrAppend(&out, "\nexample:\n  ", example->second, "\n");
  if (TakesJobFlags(cmd)) absl::StrAppend(&out, "\n", pstrain::JobFlagsUsage());
  if (cmd == "launch" || cmd == "status") {
    absl::StrAppend(&out, "\n", pstrain::FlagUsage(pstrain::FlagGroup::kSecurity));
  }
  return out;
}

// The commands whose one required argument is a checkpoint.
bool TakesACheckpoint(const std::string& cmd) {
  return cmd == "inspect" || cmd == "evaluate" || cmd == "predict" || cmd == "export";
}

std::string SelfPath(const char* argv0) {
  std::string self = pstrain::SelfExecutablePath();
  return self.empty() ? argv0 : self;
}

int Describe(int argc, char** argv, const char* tf_config) {
  auto args = pstrain::CliArgs::Parse(argc, argv, 2);
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", std::string(args.status().message()).c_str());
    return pstrain::kExitBadConfig;
  }
  auto json = args->GetBool("json", false);
  absl::Status used = json.ok() ? args->CheckAllUsed() : json.status();
  if (used.ok() && !args->positional().empty()) {
    used = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  if (!used.ok()) {
    std::fprintf(stderr, "pstrain describe: %s\n", std::string(used.message()).c_str());
    return pstrain::kExitBadConfig;
  }
  if (tf_config == nullptr) {
    std::fprintf(stderr, "TF_CONFIG is not set\n");
    return pstrain::kExitBadConfig;
  }
  auto cfg = pstrain::ParseTfConfig(tf_config);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", std::string(cfg.status().message()).c_str());
    return pstrain::kExitBadConfig;
  }
  if (*json) {
    std::fputs(pstrain::DescribeJson(*cfg).c_str(), stdout);
  } else {
    std::fputs(pstrain::DescribeText(*cfg).c_str(), stdout);
    std::printf("%s\n", pstrain::model::DescribeCuda().c_str());
    const std::string kernel_tls = pstrain::KernelTlsMissing();
    std::printf("kernel TLS: %s\n",
                kernel_tls.empty()
                    ? "available: frames inside TLS are sealed and opened by the kernel"
                    : absl::StrCat("not used (", kernel_tls,
                                   "): frames inside TLS are sealed by OpenSSL in the task")
                          .c_str());
  }
  return pstrain::kExitOk;
}

}  // namespace

// `pstrain train --local`.
int TrainLocal(pstrain::CliArgs& args, const char* tf_config) {
  pstrain::SetLogTag("local");
  auto local = args.GetBool("local", false);
  // A local run in a cloud container writes where the platform collects
  // outputs, as the cluster's tasks would.
  pstrain::TfConfig cfg;
  if (tf_config != nullptr) {
    auto parsed = pstrain::ParseTfConfig(tf_config);
    if (parsed.ok()) cfg = *parsed;
  }
  auto output_dir = pstrain::OutputDirFromFlags(args, cfg.environment);
  // A rerun resumes the run in the directory with its settings, the flags
  // given overriding them.
  if (output_dir.ok()) {
    if (const std::string taken = pstrain::TakeRelaunchSettings(*output_dir, args);
        !taken.empty()) {
      std::fprintf(stderr, "pstrain train: %s\n", taken.c_str());
    }
  }
  auto job = pstrain::JobSpecFromFlags(args);
  // OpenBLAS's own thread count (one per core) unless --blas_threads says.
  const bool blas_given = args.Has("blas_threads");
  auto blas_threads = pstrain::IntFlag(args, "blas_threads");
  absl::Status s = local.status();
  if (s.ok()) s = job.status();
  if (s.ok()) s = blas_threads.status();
  if (s.ok()) s = output_dir.status();
  if (s.ok()) s = args.CheckAllUsed();
  if (s.ok() && !*local) {
    s = absl::InvalidArgumentError(
        "pstrain train runs only --local; a cluster job starts with pstrain launch or "
        "from TF_CONFIG");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "pstrain train: %s\n", std::string(s.message()).c_str());
    return pstrain::CommandExitCode(s);
  }
  if (blas_given) pstrain::model::SetComputeThreads(static_cast<int>(*blas_threads));
  // SIGTERM or SIGINT: the run checkpoints the step it reached and stops.
  static std::atomic<int> stop{0};
  pstrain::WatchStopSignals([](int signo) { stop.store(signo); });
  pstrain::train::LocalOptions options;
  options.output_dir = *output_dir;
  options.run = pstrain::RunInfo(args, cfg);
  options.stop = &stop;
  auto result = pstrain::train::RunLocal(*job, options);
  if (!result.ok()) {
    std::fprintf(stderr, "pstrain train: %s\n", std::string(result.status().message()).c_str());
    return pstrain::CommandExitCode(result.status());
  }
  if (result->stopped_by != 0) {
    std::printf("stopped by signal %d at step %d; checkpointed in %s, where a rerun resumes\n",
                result->stopped_by, static_cast<int>(result->steps), output_dir->c_str());
    return 128 + result->stopped_by;
  }
  std::printf(
      "test accuracy: %.4f\ntest loss: %.4f\ntraining throughput: %.0f examples/s "
      "(%d steps in %.1f s)\ninput: %.1f s to load; training waited for input %.2f%% of the "
      "time\n",
      result->test_accuracy, result->test_loss, result->examples_per_sec,
      static_cast<int>(result->steps - std::min(result->resumed_step, result->steps)),
      result->train_seconds, result->load_seconds,
      100.0 * result->input_wait_seconds / std::max(result->train_seconds, 1e-9));
  if (result->test_auc.has_value()) std::printf("test auc: %.4f\n", *result->test_auc);
  std::printf("checkpoint, metrics and summaries: %s (final_metrics.json, ckpt-%d/)\n",
              output_dir->c_str(), static_cast<int>(result->steps));
  return pstrain::kExitOk;
}

// `pstrain supervise [--restarts N] -- [task flags]` (launcher/supervise.h):
// its own flags before "--", the task's after it.
static int SuperviseMain(const std::string& self, int argc, char** argv) {
  pstrain::SetLogTag("supervise");
  int dash = argc;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      dash = i;
      break;
    }
  }
  auto args = pstrain::CliArgs::Parse(dash, argv, 2);
  absl::Status s = args.status();
  pstrain::SuperviseOptions options;
  if (s.ok()) {
    auto restarts = args->GetIntInRange("restarts", options.restarts, 0, 1000);
    s = restarts.status();
    if (s.ok()) options.restarts = static_cast<int>(*restarts);
  }
  if (s.ok()) s = args->CheckAllUsed();
  if (s.ok() && !args->positional().empty()) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument \"", args->positional()[0],
        "\" (the task's flags go after --: pstrain supervise --restarts=3 -- --epochs=2)"));
  }
  if (!s.ok()) {
    std::fprintf(stderr, "pstrain supervise: %s\n", std::string(s.message()).c_str());
    return pstrain::kExitBadConfig;
  }
  options.argv = {self};
  for (int i = dash + 1; i < argc; ++i) options.argv.emplace_back(argv[i]);
  static std::atomic<int> stop{0};
  pstrain::WatchStopSignals([](int signo) { stop.store(signo); });
  options.stop = &stop;
  options.log = [](absl::string_view line) { pstrain::LogLine(line); };
  return pstrain::Supervise(options);
}

int pstrain::PstrainMain(int argc, char** argv) {
  // First: this may execute the binary again with OPENBLAS_CORETYPE set.
  pstrain::model::UseTheCpusBlasKernels(argv);
  pstrain::InstallCrashHandler(argv[0]);
  // Every role moves MiB-sized messages (base/malloc_tuning.h).
  pstrain::TuneMallocForLargeMessages();
#ifdef NDEBUG
  // Debian's Abseil is built with its debug checks, so every Mutex::Lock
  // and every Mutex's destruction also updates a process-wide lock-order
  // graph under a global lock. Optimised builds (-c opt: images, benches)
  // do without; test builds keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  // What run.json records of the binary that ran a job.
  pstrain::SetBinaryVersion(pstrain::kPstrainVersion, pstrain::BuildCommit());
  // Read once; every command and role is handed the text.
  const char* const tf_config = std::getenv("TF_CONFIG");
  // `pstrain version`, and --version (-V) given to any command or role.
  if ((argc == 2 && std::strcmp(argv[1], "version") == 0) || pstrain::AsksForVersion(argc, argv, 1)) {
    std::fputs(pstrain::VersionText().c_str(), stdout);
    return pstrain::kExitOk;
  }
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string cmd = argv[1];
    if (cmd != "help" && pstrain::AsksForHelp(argc, argv, 2)) {
      if (cmd != "describe" && Examples().count(cmd) == 0) {
        std::fprintf(stderr, "pstrain: unknown command \"%s\"\n%s", cmd.c_str(), kUsage);
        return pstrain::kExitBadConfig;
      }
      std::printf("%s", CommandUsage(cmd).c_str());
      return pstrain::kExitOk;
    }
    if (cmd == "describe") return Describe(argc, argv, tf_config);
    if (cmd == "supervise") return SuperviseMain(SelfPath(argv[0]), argc, argv);
    if (cmd == "help" && argc >= 3 && std::strcmp(argv[2], "flags") == 0) {
      std::printf("%s", pstrain::FlagReference().c_str());
      return pstrain::kExitOk;
    }
    if (cmd == "help") {
      std::printf("%s\n%s\n%s", kUsage, pstrain::JobFlagsUsage().c_str(),
                  pstrain::TaskFlagUsage().c_str());
      return pstrain::kExitOk;
    }
    const std::string self = SelfPath(argv[0]);
    // The commands that take flags: each gets them parsed (`tfconfig` also
    // its positional sub-command).
    using Command = std::function<int(pstrain::CliArgs&)>;
    const std::map<std::string, std::pair<int, Command>> commands = {
        {"launch", {2, [&](pstrain::CliArgs& a) { return pstrain::LaunchMain(self, a); }}},
        {"placement", {2, [](pstrain::CliArgs& a) { return pstrain::PlacementMain(a); }}},
        {"summary", {2, [](pstrain::CliArgs& a) { return pstrain::SummaryMain(a); }}},
        {"inspect", {1, [](pstrain::CliArgs& a) { return pstrain::InspectMain(a); }}},
        {"evaluate", {1, [](pstrain::CliArgs& a) { return pstrain::EvaluateMain(a); }}},
        {"predict", {1, [](pstrain::CliArgs& a) { return pstrain::PredictMain(a); }}},
        {"export", {1, [](pstrain::CliArgs& a) { return pstrain::ExportMain(a); }}},
        {"status",
         {2,
          [&](pstrain::CliArgs& a) {
            return pstrain::StatusMain(a, tf_config == nullptr ? "" : tf_config);
          }}},
        {"experiment", {2, [&](pstrain::CliArgs& a) { return pstrain::ExperimentMain(self, a); }}},
        {"plan", {2, [&](pstrain::CliArgs& a) { return pstrain::PlanMain(self, a); }}},
        {"tfconfig", {1, [](pstrain::CliArgs& a) { return pstrain::TfConfigMain(a); }}},
        {"data", {1, [](pstrain::CliArgs& a) { return pstrain::DataMain(a); }}},
        {"train", {2, [&](pstrain::CliArgs& a) { return TrainLocal(a, tf_config); }}},
        {"bench", {2, [&](pstrain::CliArgs& a) { return pstrain::TrainBenchMain(self, a); }}},
    };
    auto it = commands.find(cmd);
    if (it == commands.end()) {
      std::fprintf(stderr, "pstrain: unknown command \"%s\"\n%s", cmd.c_str(), kUsage);
      return pstrain::kExitBadConfig;
    }
    // A command given nothing to work on says so, then how it is used.
    if (argc == 2 && (TakesACheckpoint(cmd) || cmd == "tfconfig" || cmd == "data")) {
      std::fprintf(stderr, "pstrain %s: %s\n%s", cmd.c_str(),
                   TakesACheckpoint(cmd)
                       ? "give one checkpoint (a job's output directory or a ckpt-<step> "
                         "directory in it)"
                       : "give a sub-command",
                   CommandUsage(cmd).c_str());
      return pstrain::kExitBadConfig;
    }
    auto args = pstrain::CliArgs::Parse(argc, argv, it->second.first);
    if (!args.ok()) {
      std::fprintf(stderr, "pstrain %s: %s\n", cmd.c_str(),
                   std::string(args.status().message()).c_str());
      return pstrain::kExitBadConfig;
    }
    // Commands parsed from argv[2] take flags only: a stray word (a flag
    // with one dash, a value without its flag) is refused before anything
    // starts.
    if (it->second.first == 2 && !args->positional().empty()) {
      std::fprintf(stderr,
                   "pstrain %s: unexpected argument \"%s\" (flags start with --; "
                   "`pstrain %s --help` lists them)\n",
                   cmd.c_str(), args->positional()[0].c_str(), cmd.c_str());
      return pstrain::kExitBadConfig;
    }
    return it->second.second(*args);
  }
  // A task's flags with --help (-h) among them: every role's usage.
  if (pstrain::AsksForHelp(argc, argv, 1)) {
    std::printf("%s\n%s\n%s", kUsage, pstrain::JobFlagsUsage().c_str(),
                pstrain::TaskFlagUsage().c_str());
    return pstrain::kExitOk;
  }
  return pstrain::RunAnyRole(tf_config, argc, argv);
}
