#include "cli/experiment.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "experiment/plots.h"
#include "experiment/runner.h"
#include "experiment/runs.h"
#include "job/job_flags.h"

namespace pstrain {
namespace {

using experiment::ExperimentMode;
using experiment::ExperimentOptions;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pstrain experiment: %s\n", std::string(s.message()).c_str());
  return CommandExitCode(s);
}

// The experiment's own flags and the job flags into *options (the modes
// parsed for the job's replicas; the job flags checked before any run).
absl::Status ParseOptions(CliArgs& args, ExperimentOptions* options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string modes,
                           args.GetString("modes", "async,sync,sync+backup:1,ssp:2"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t workers, args.GetInt("workers", 2));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t ps, args.GetInt("ps", 1));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t repeats, args.GetInt("repeats", 1));
  PSTRAIN_ASSIGN_OR_RETURN(options->target, args.GetDouble("target", 0.80));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t eval_poll, args.GetInt("eval_poll_secs", 1));
  if (workers < 1 || workers > 16 || ps < 1 || ps > 16 || repeats < 1 || repeats > 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers=", workers, " --ps=", ps, " --repeats=", repeats,
                     ": workers and ps must be in 1..16, repeats in 1..20"));
  }
  if (!(options->target > 0 && options->target < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target=", options->target, ": an accuracy in (0, 1)"));
  }
  options->num_workers = static_cast<int>(workers);
  options->num_ps = static_cast<int>(ps);
  options->repeats = static_cast<int>(repeats);
  options->eval_poll_secs = static_cast<int>(eval_poll);
  PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobSpecFromFlags(args));
  PSTRAIN_ASSIGN_OR_RETURN(std::string output_dir, OutputDirFromFlags(args, ""));
  PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
  options->dir = output_dir + "/experiment";
  const int replicas = options->num_workers + (job.chief_trains ? 1 : 0);
  for (absl::string_view m : absl::StrSplit(modes, ',', absl::SkipEmpty())) {
    PSTRAIN_ASSIGN_OR_RETURN(ExperimentMode mode,
                             experiment::ParseExperimentMode(std::string(m), replicas));
    options->modes.push_back(std::move(mode));
  }
  if (options->modes.empty()) return absl::InvalidArgumentError("--modes names no mode");
  // The job flags each run gets, less those the experiment sets itself.
  bool checkpoint_flag = false;
  const auto& names = JobFlagNames();
  for (const std::string& flag : args.raw_flags()) {
    const std::string name = flag.substr(2, flag.find('=') - 2);
    if (name == "output_dir" || name == "consistency" || name == "replicas_to_aggregate" ||
        std::find(names.begin(), names.end(), name) == names.end()) {
      continue;
    }
    checkpoint_flag |= name == "checkpoint_secs" || name == "checkpoint_steps";
    options->job_flags.push_back(flag);
  }
  // A checkpoint every second: what the evaluator scores, the points of
  // the accuracy curves.
  if (!checkpoint_flag) options->job_flags.push_back("--checkpoint_secs=1");
  return absl::OkStatus();
}

}  // namespace

int ExperimentMain(const std::string& self_path, CliArgs& args) {
  ExperimentOptions options;
  options.pstrain_path = self_path;
  if (absl::Status s = ParseOptions(args, &options); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<experiment::ExperimentRun>> runs = experiment::RunExperiment(options);
  if (!runs.ok()) return Fail(runs.status());
  const std::string& dir = options.dir;
  if (absl::Status s = WriteFileAtomically(dir + "/runs.csv", experiment::RunsCsv(*runs));
      !s.ok()) {
    return Fail(s);
  }
  const std::string md = experiment::SummaryTable(options.modes, *runs, options.target);
  const std::string header = absl::StrCat(
      "Medians over repeats. ", options.num_workers, " workers and the chief as replicas, ",
      options.num_ps, " PS",
      absl::c_any_of(options.modes,
                     [](const experiment::ExperimentMode& m) { return m.num_ps == 0; })
          ? " (none for allreduce)"
          : "",
      "; flags: ", absl::StrJoin(options.job_flags, " "),
      ". Time to accuracy: from launch to the first checkpoint the evaluator scored at or above "
      "the target. Staleness: PS steps between a gradient's pull and its apply.\n\n");
  if (absl::Status s = WriteFileAtomically(dir + "/summary.md", header + md); !s.ok()) {
    return Fail(s);
  }
  absl::Status plotted = experiment::Plot(dir, options.modes, *runs);
  std::printf("\n%s%s\n", header.c_str(), md.c_str());
  std::printf("written: %s/runs.csv, %s/summary.md%s\n", dir.c_str(), dir.c_str(),
              plotted.ok() ? absl::StrCat(", ", dir, "/accuracy_vs_time.png, ", dir,
                                          "/accuracy_vs_examples.png, ", dir, "/staleness.png")
                                 .c_str()
                           : "");
  if (!plotted.ok()) return Fail(plotted);
  return kExitOk;
}

}  // namespace pstrain
