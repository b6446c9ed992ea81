#include "cli/launch.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "cluster/tf_config.h"
#include "job/job_description.h"
#include "job/job_flags.h"
#include "job/run_record.h"
#include "job/run_settings.h"
#include "job/security_flags.h"
#include "launcher/local_cluster.h"
#include "model/model_graph.h"
#include "model/network.h"

namespace pstrain {

int LaunchMain(const std::string& self_path, CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain launch: %s\n", std::string(s.message()).c_str());
    return CommandExitCode(s);
  };
  LaunchOptions options;
  options.self_path = self_path;
  // --ps 0: a cluster without ps, trained by ring all-reduce.
  auto ps = args.GetIntInRange("ps", options.num_ps, 0, 64);
  auto workers = args.GetIntInRange("workers", options.num_workers, 1, 64);
  auto chief = args.GetBool("chief", options.with_chief);
  auto evaluator = args.GetBool("evaluator", options.with_evaluator);
  auto eval_poll = args.GetIntInRange("eval_poll_secs", options.eval_poll_secs, 1, 3600);
  auto timeout = args.GetIntInRange("timeout_s", 0, 0, 30 * 86400);
  for (const absl::Status& s : {ps.status(), workers.status(), chief.status(), evaluator.status(),
                                eval_poll.status(), timeout.status()}) {
    if (!s.ok()) return fail(s);
  }
  auto output_dir = OutputDirFromFlags(args, "");
  if (!output_dir.ok()) return fail(output_dir.status());
  // A relaunch resumes the run in the directory with its settings, the
  // flags given overriding them.
  if (const std::string taken = TakeRelaunchSettings(*output_dir, args); !taken.empty()) {
    std::fprintf(stderr, "pstrain launch: %s\n", taken.c_str());
  }
  // Validate the job flags now, in this process, so a typo fails before any
  // task starts; then hand the same flags to the tasks.
  auto job = JobSpecFromFlags(args);
  if (!job.ok()) return fail(job.status());
  auto security = SecurityFromFlags(args);
  if (!security.ok()) return fail(security.status());
  absl::Status used = args.CheckAllUsed();
  if (!used.ok()) return fail(used);
  if (!args.positional().empty() && args.positional().size() > 1) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args.positional()[1], "\"")));
  }
  // A --straggler naming a task this launch does not start is a mistake.
  ClusterSpec shape;
  if (*chief) shape.chief = HostPort{"127.0.0.1", 1};
  shape.worker.assign(static_cast<size_t>(std::max<int64_t>(*workers, 0)),
                      HostPort{"127.0.0.1", 1});
  if (absl::Status s = CheckStragglers(*job, shape); !s.ok()) return fail(s);
  if (*ps > 0) shape.ps.assign(static_cast<size_t>(*ps), HostPort{"127.0.0.1", 1});
  if (absl::Status s = CheckTableUpdates(*job, shape); !s.ok()) return fail(s);
  // A relaunch onto a run of another model is refused here, before
  // anything in the output directory changes, its tasks' logs included
  // (the chief would refuse it too, after the logs were set aside).
  auto graph = model::ModelGraph::Create(job->model);
  if (!graph.ok()) return fail(graph.status());
  if (absl::Status s =
          CheckRelaunch(*output_dir, DescribeModel(graph->variables(), job->optimizer.name));
      !s.ok()) {
    return fail(s);
  }
  options.num_ps = static_cast<int>(*ps);
  options.num_workers = static_cast<int>(*workers);
  options.with_chief = *chief;
  options.with_evaluator = *evaluator;
  options.eval_poll_secs = static_cast<int>(*eval_poll);
  options.timeout = absl::Seconds(*timeout);
  options.output_dir = *output_dir;
  const auto& names = JobFlagNames();
  const auto& security_names = SecurityFlagNames();
  for (const std::string& flag : args.raw_flags()) {
    std::string name = flag.substr(2, flag.find('=') - 2);
    if (std::find(security_names.begin(), security_names.end(), name) != security_names.end()) {
      options.task_flags.push_back(flag);
    } else if (name == "config" || name == "model_config") {
      // Every task reads the config's security block; the PS nothing else.
      options.task_flags.push_back(flag);
    } else if (name != "output_dir" && std::find(names.begin(), names.end(), name) != names.end()) {
      options.job_flags.push_back(flag);
    }
  }
  return RunLaunch(options);
}

}  // namespace pstrain
