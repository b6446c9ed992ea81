#include "cli/launch.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/signals.h"
#include "base/subprocess.h"
#include "cluster/tf_config.h"
#include "job/job_flags.h"
#include "job/security_flags.h"

namespace pstrain {
namespace {

std::atomic<int> g_stop_signal{0};

// How long stopped tasks get before SIGKILL: the chief writes a checkpoint
// on SIGTERM, and the PS serve until it is written.
constexpr absl::Duration kStopGrace = absl::Seconds(15);

struct Task {
  TaskId id;
  HostPort address;
  pid_t pid = 0;
  std::string log;
  absl::Time started;
  bool running = false;
  SpawnOptions spawn;  // how it was started, to start it again
  int restarts = 0;
  int64_t log_read = 0;  // bytes of `log` relayed so far
};

// The whole lines of `path` past *offset (advanced past them); "" when
// there are none yet.
std::string ReadNewLines(const std::string& path, int64_t* offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(*offset);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return "";
  *offset += static_cast<int64_t>(end + 1);
  text.resize(end + 1);
  return text;
}

// A worker or the evaluator that ends with a retryable code (128-255: a
// lost peer, a signal) is started again, as a platform's ExitCode restart
// policy would, at most this many times.
constexpr int kMaxRestarts = 3;

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// A log an earlier launch into the same directory left at `log`
// (logs/ps-0.log) is kept as logs/ps-0.1.log, .2, ...: the first free one.
void KeepEarlierLog(const std::string& log) {
  std::error_code ec;
  if (!std::filesystem::exists(log, ec) || std::filesystem::file_size(log, ec) == 0) return;
  const std::string stem = log.substr(0, log.size() - 4);  // less ".log"
  for (int n = 1; n < 100000; ++n) {
    const std::string kept = absl::StrCat(stem, ".", n, ".log");
    if (std::filesystem::exists(kept, ec)) continue;
    std::filesystem::rename(log, kept, ec);
    return;
  }
}

// The line of a failed task's log that says why: its last "failed"
// line, else its last line.
std::string WhyFailed(const std::string& log) {
  auto text = ReadFile(log);
  if (!text.ok()) return "";
  std::string last, failed;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    last = std::string(line);
    if (absl::StrContains(line, "failed") || absl::StrContains(line, "error")) failed = last;
  }
  std::string why = failed.empty() ? last : failed;
  // Less the log's own "HH:MM:SS.mmm type:index: " prefix.
  const size_t space = why.find(' ');
  if (space == 12 && why[2] == ':' && why[8] == '.') {
    const size_t tag_end = why.find(": ", space);
    if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
  }
  return why;
}

// SIGTERM every running task, then SIGKILL whatever is left after `grace`.
void StopAll(std::vector<Task>& tasks, absl::Duration grace) {
  for (Task& t : tasks) {
    if (t.running) SignalChild(t.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  for (Task& t : tasks) {
    if (!t.running) continue;
    auto e = WaitChild(t.pid, std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!e.has_value()) {
      SignalChild(t.pid, SIGKILL);
      e = WaitChild(t.pid, absl::Seconds(5));
    }
    t.running = false;
    Say(absl::StrFormat("%-10s stopped%s", t.id.ToString(),
                        e.has_value() ? absl::StrCat(" (exit ", e->code, ")") : ""));
  }
}

}  // namespace

int RunLaunch(const LaunchOptions& options) {
  const std::string logs = options.output_dir + "/logs";
  absl::Status s = MakeDirs(logs);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return ExitCodeFor(s);
  }
  const int n = options.num_ps + options.num_workers + (options.with_chief ? 1 : 0) +
                (options.with_evaluator ? 1 : 0);
  auto ports = PickFreePorts(n);
  if (!ports.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ports.status().message()).c_str());
    return kExitRetryable;
  }
  TfConfig base;
  int next = 0;
  auto local = [&]() { return HostPort{"127.0.0.1", (*ports)[next++]}; };
  if (options.with_chief) base.cluster.chief = local();
  for (int i = 0; i < options.num_ps; ++i) base.cluster.ps.push_back(local());
  for (int i = 0; i < options.num_workers; ++i) base.cluster.worker.push_back(local());
  if (options.with_evaluator) base.cluster.evaluator.push_back(local());

  std::vector<Task> tasks;
  for (int i = 0; i < options.num_ps; ++i) tasks.push_back({{Role::kPs, i}, base.cluster.ps[i]});
  if (options.with_chief) tasks.push_back({{Role::kChief, 0}, *base.cluster.chief});
  for (int i = 0; i < options.num_workers; ++i) {
    tasks.push_back({{Role::kWorker, i}, base.cluster.worker[i]});
  }
  if (options.with_evaluator) tasks.push_back({{Role::kEvaluator, 0}, base.cluster.evaluator[0]});

  WatchStopSignals([](int signo) { g_stop_signal.store(signo); });
  Say(absl::StrFormat("launching %d ps, %d workers%s%s; logs in %s/", options.num_ps,
                      options.num_workers, options.with_chief ? ", 1 chief" : "",
                      options.with_evaluator ? ", 1 evaluator" : "", logs));
  std::map<pid_t, Task*> by_pid;
  for (Task& t : tasks) {
    TfConfig cfg = base;
    cfg.task = t.id;
    SpawnOptions spawn;
    spawn.argv = {options.self_path};
    spawn.argv.insert(spawn.argv.end(), options.task_flags.begin(), options.task_flags.end());
    if (t.id.role != Role::kPs) {
      spawn.argv.insert(spawn.argv.end(), options.job_flags.begin(), options.job_flags.end());
      spawn.argv.push_back("--output_dir=" + options.output_dir);
    }
    if (t.id.role == Role::kEvaluator) {
      spawn.argv.push_back(absl::StrCat("--eval_poll_secs=", options.eval_poll_secs));
    }
    spawn.env = {{"TF_CONFIG", cfg.ToJson()}};
    t.log = absl::StrCat(logs, "/", RoleName(t.id.role), "-", t.id.index, ".log");
    KeepEarlierLog(t.log);
    spawn.log_path = t.log;
    t.spawn = spawn;
    auto pid = Spawn(spawn);
    if (!pid.ok()) {
      std::fprintf(stderr, "%s\n", std::string(pid.status().message()).c_str());
      StopAll(tasks, kStopGrace);
      return kExitRetryable;
    }
    t.pid = *pid;
    t.running = true;
    t.started = absl::Now();
    by_pid[t.pid] = &t;
    Say(absl::StrFormat("%-10s started   %-16s pid %-7d log %s", t.id.ToString(),
                        t.address.ToString(), t.pid, t.log));
  }

  // What the tasks report, as it arrives: each training task's progress
  // lines (step, loss, examples/s, ETA) and the evaluator's scores.
  auto relay = [&] {
    for (Task& t : tasks) {
      if (t.id.role == Role::kPs) continue;
      std::string fresh = ReadNewLines(t.log, &t.log_read);
      for (absl::string_view line : absl::StrSplit(fresh, '\n', absl::SkipEmpty())) {
        if (t.id.role == Role::kEvaluator) {
          const size_t at = line.find("eval at step ");
          if (at != absl::string_view::npos) Say(absl::StrCat("evaluator: ", line.substr(at)));
          continue;
        }
        const size_t at = line.find(": step ");
        if (at != absl::string_view::npos && absl::StrContains(line, " - loss ") &&
            absl::StrContains(line, " - ETA ")) {
          Say(absl::StrFormat("%-10s %s", t.id.ToString(), line.substr(at + 2)));
        }
      }
    }
  };

  const absl::Time deadline = options.timeout > absl::ZeroDuration() ? absl::Now() + options.timeout
                                                                     : absl::InfiniteFuture();
  int result = kExitOk;
  int running = static_cast<int>(tasks.size());
  while (running > 0) {
    relay();
    if (int signo = g_stop_signal.load(); signo != 0) {
      Say(absl::StrCat("signal ", signo, ": stopping every task"));
      StopAll(tasks, kStopGrace);
      return 128 + signo;
    }
    if (absl::Now() >= deadline) {
      Say(absl::StrCat("the job ran past --timeout_s (", absl::FormatDuration(options.timeout),
                       "): stopping every task"));
      StopAll(tasks, kStopGrace);
      return kExitRetryable;
    }
    auto e = WaitAnyChild(absl::Milliseconds(200));
    if (!e.has_value()) continue;
    auto it = by_pid.find(e->pid);
    if (it == by_pid.end()) continue;
    Task& t = *it->second;
    t.running = false;
    --running;
    relay();  // its last lines before the line saying it ended
    Say(absl::StrFormat("%-10s exited    code %d after %.1fs", t.id.ToString(), e->code,
                        absl::ToDoubleSeconds(absl::Now() - t.started)));
    if (e->code >= 128 && (t.id.role == Role::kWorker || t.id.role == Role::kEvaluator) &&
        t.restarts < kMaxRestarts) {
      ++t.restarts;
      KeepEarlierLog(t.log);
      auto pid = Spawn(t.spawn);
      if (pid.ok()) {
        t.pid = *pid;
        t.running = true;
        t.started = absl::Now();
        by_pid[t.pid] = &t;
        ++running;
        t.log_read = 0;
        Say(absl::StrFormat("%-10s restarted pid %-7d (exit %d is retryable; restart %d of %d)",
                            t.id.ToString(), t.pid, e->code, t.restarts, kMaxRestarts));
        continue;
      }
      Say(absl::StrCat(t.id.ToString(), " could not be restarted: ", pid.status().message()));
    }
    if (e->code != 0) {
      const std::string why = WhyFailed(t.log);
      Say(absl::StrCat(t.id.ToString(), " failed", why.empty() ? "" : ": ", why));
      Say(absl::StrCat("  log: ", t.log, "; stopping the others"));
      StopAll(tasks, kStopGrace);
      result = e->code;
      break;
    }
  }
  relay();
  if (result != kExitOk) return result;
  auto metrics_text = ReadFile(options.output_dir + "/final_metrics.json");
  if (!metrics_text.ok()) {
    Say(absl::StrCat("every task ended, but the chief wrote no metrics: ",
                     metrics_text.status().message()));
    return kExitPermanent;
  }
  auto metrics = ParseJson(*metrics_text);
  const Json* acc = metrics.ok() ? FindMember(*metrics, "test_accuracy") : nullptr;
  const Json* rate = metrics.ok() ? FindMember(*metrics, "examples_per_sec") : nullptr;
  if (acc == nullptr || !acc->is_number()) {
    Say("final_metrics.json has no test_accuracy");
    return kExitPermanent;
  }
  Say(absl::StrFormat("test accuracy: %.4f", acc->get<double>()));
  if (const Json* auc = FindMember(*metrics, "test_auc"); auc != nullptr && auc->is_number()) {
    Say(absl::StrFormat("test auc: %.4f", auc->get<double>()));
  }
  if (rate != nullptr && rate->is_number()) {
    // The job's examples over its training wall time; each replica's own
    // rate beside it.
    std::vector<std::string> each;
    if (const Json* reps = FindMember(*metrics, "replicas"); reps != nullptr && reps->is_array()) {
      for (const Json& r : *reps) {
        const Json* task = FindMember(r, "task");
        const Json* own = FindMember(r, "examples_per_sec");
        if (task != nullptr && task->is_string() && own != nullptr && own->is_number()) {
          each.push_back(absl::StrFormat("%s %.0f", task->get<std::string>(), own->get<double>()));
        }
      }
    }
    const Json* wall = FindMember(*metrics, "training_seconds");
    Say(absl::StrFormat(
        "training throughput: %.0f examples/s over %.1f s of training (per "
        "replica: %s)",
        rate->get<double>(), wall != nullptr && wall->is_number() ? wall->get<double>() : 0.0,
        absl::StrJoin(each, ", ")));
  }
  Say(absl::StrCat("metrics: ", options.output_dir, "/final_metrics.json; logs: ", logs, "/"));
  return kExitOk;
}

int LaunchMain(const std::string& self_path, CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "pstrain launch: %s\n", std::string(s.message()).c_str());
    return ExitCodeFor(s);
  };
  LaunchOptions options;
  options.self_path = self_path;
  auto ps = args.GetIntInRange("ps", options.num_ps, 1, 64);
  auto workers = args.GetIntInRange("workers", options.num_workers, 1, 64);
  auto chief = args.GetBool("chief", options.with_chief);
  auto evaluator = args.GetBool("evaluator", options.with_evaluator);
  auto eval_poll = args.GetIntInRange("eval_poll_secs", options.eval_poll_secs, 1, 3600);
  auto timeout = args.GetIntInRange("timeout_s", 0, 0, 30 * 86400);
  for (const absl::Status& s : {ps.status(), workers.status(), chief.status(), evaluator.status(),
                                eval_poll.status(), timeout.status()}) {
    if (!s.ok()) return fail(s);
  }
  // Validate the job flags now, in this process, so a typo fails before any
  // task starts; then hand the same flags to the tasks.
  auto job = JobSpecFromFlags(args);
  if (!job.ok()) return fail(job.status());
  auto output_dir = OutputDirFromFlags(args, "");
  if (!output_dir.ok()) return fail(output_dir.status());
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
