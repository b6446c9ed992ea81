#include "experiment/runner.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/exit_codes.h"
#include "launcher/local_cluster.h"

namespace pstrain::experiment {

absl::StatusOr<std::vector<ExperimentRun>> RunExperiment(const ExperimentOptions& options) {
  std::vector<ExperimentRun> runs;
  for (int r = 1; r <= options.repeats; ++r) {
    for (const ExperimentMode& mode : options.modes) {
      LaunchOptions launch;
      launch.self_path = options.pstrain_path;
      launch.num_ps = mode.num_ps >= 0 ? mode.num_ps : options.num_ps;
      launch.num_workers = options.num_workers;
      launch.with_evaluator = true;
      launch.eval_poll_secs = options.eval_poll_secs;
      launch.output_dir = absl::StrCat(options.dir, "/runs/", mode.dir, "-r", r);
      // A fresh directory: a job resumes from checkpoints it finds.
      std::error_code ec;
      std::filesystem::remove_all(launch.output_dir, ec);
      launch.job_flags = options.job_flags;
      launch.job_flags.insert(launch.job_flags.end(), mode.flags.begin(), mode.flags.end());
      launch.timeout = options.run_timeout;
      std::printf("experiment: %s, repeat %d of %d: %s\n", mode.name.c_str(), r, options.repeats,
                  absl::StrJoin(launch.job_flags, " ").c_str());
      std::fflush(stdout);
      const double start_unix = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
      const absl::Time start = absl::Now();
      const int code = RunLaunch(launch);
      if (code != kExitOk) {
        return absl::InternalError(absl::StrCat(mode.name, " run ", r, " failed (exit ", code,
                                                "); logs under ", launch.output_dir, "/logs"));
      }
      ExperimentRun run;
      run.mode = mode.name;
      run.repeat = r;
      run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (absl::Status s = ReadRun(launch.output_dir, start_unix, options.target, &run); !s.ok()) {
        return s;
      }
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace pstrain::experiment
