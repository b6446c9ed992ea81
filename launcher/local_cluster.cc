#include "launcher/local_cluster.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/signals.h"
#include "base/subprocess.h"
#include "cluster/tf_config.h"
#include "launcher/task_logs.h"

namespace pstrain {
namespace {

using launcher::KeepEarlierLog;

std::atomic<int> g_stop_signal{0};

// How long stopped tasks get before SIGKILL: the chief writes a checkpoint
// on SIGTERM, and the PS serve until it is written.
constexpr absl::Duration kStopGrace = absl::Seconds(15);

// A worker or the evaluator that ends with a retryable code (128-255: a
// lost peer, a signal) is started again, as a platform's ExitCode restart
// policy would, at most this many times.
constexpr int kMaxRestarts = 3;

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

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
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

// The cluster on `ports` (one per task, in the order the tasks start):
// its TF_CONFIG (less the task) and its tasks.
TfConfig ClusterOn(const LaunchOptions& options, const std::vector<int>& ports,
                   std::vector<Task>* tasks) {
  TfConfig base;
  size_t next = 0;
  auto local = [&]() { return HostPort{"127.0.0.1", ports[next++]}; };
  if (options.with_chief) base.cluster.chief = local();
  for (int i = 0; i < options.num_ps; ++i) base.cluster.ps.push_back(local());
  for (int i = 0; i < options.num_workers; ++i) base.cluster.worker.push_back(local());
  if (options.with_evaluator) base.cluster.evaluator.push_back(local());
  for (int i = 0; i < options.num_ps; ++i) tasks->push_back({{Role::kPs, i}, base.cluster.ps[i]});
  if (options.with_chief) tasks->push_back({{Role::kChief, 0}, *base.cluster.chief});
  for (int i = 0; i < options.num_workers; ++i) {
    tasks->push_back({{Role::kWorker, i}, base.cluster.worker[i]});
  }
  if (options.with_evaluator) {
    tasks->push_back({{Role::kEvaluator, 0}, base.cluster.evaluator[0]});
  }
  return base;
}

// How task `t` of the cluster `base` is started: this binary, its flags,
// its TF_CONFIG, its log.
SpawnOptions SpawnFor(const Task& t, const TfConfig& base, const LaunchOptions& options) {
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
  spawn.log_path = t.log;
  return spawn;
}

// Starts (or starts again) `t` from t.spawn; records it in *by_pid.
absl::Status Start(Task& t, std::map<pid_t, Task*>* by_pid) {
  absl::StatusOr<pid_t> pid = Spawn(t.spawn);
  if (!pid.ok()) return pid.status();
  t.pid = *pid;
  t.running = true;
  t.started = absl::Now();
  (*by_pid)[t.pid] = &t;
  return absl::OkStatus();
}

// What the tasks report, as it arrives: each training task's progress
// lines (step, loss, examples/s, ETA) and the evaluator's scores.
void Relay(std::vector<Task>& tasks) {
  for (Task& t : tasks) {
    if (t.id.role == Role::kPs) continue;
    const std::string fresh = launcher::ReadNewLines(t.log, &t.log_read);
    for (absl::string_view line : absl::StrSplit(fresh, '\n', absl::SkipEmpty())) {
      if (std::optional<std::string> said = launcher::RelayedLine(t.id, line)) Say(*said);
    }
  }
}

void SayExited(const Task& t, int code) {
  Say(absl::StrFormat("%-10s exited    code %d after %.1fs", t.id.ToString(), code,
                      absl::ToDoubleSeconds(absl::Now() - t.started)));
}

// The task with chief duties: the chief, else worker 0; null when neither.
Task* ChiefDutiesOf(std::vector<Task>& tasks) {
  Task* worker0 = nullptr;
  for (Task& t : tasks) {
    if (t.id.role == Role::kChief) return &t;
    if (t.id.role == Role::kWorker && t.id.index == 0) worker0 = &t;
  }
  return worker0;
}

// How long a task's failure for good waits for the chief's own end (the
// chief tells the tasks for up to 8 s, coordinator/chief_duties.h).
constexpr absl::Duration kChiefTellWait = absl::Seconds(10);

// Waits for every task to end, restarting workers and the evaluator that
// end retryably. Returns the first failed task's code (the others
// stopped), 128+N on signal N, 138 past `deadline`, or 0.
int AwaitTasks(std::vector<Task>& tasks, std::map<pid_t, Task*>& by_pid,
               const LaunchOptions& options, absl::Time deadline) {
  int running = static_cast<int>(tasks.size());
  while (running > 0) {
    Relay(tasks);
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
    Relay(tasks);  // its last lines before the line saying it ended
    SayExited(t, e->code);
    // Without ps the chief is a replica like the workers: all of them end
    // retryably when one is lost, and start again from the last checkpoint.
    const bool restartable = t.id.role == Role::kWorker || t.id.role == Role::kEvaluator ||
                             (t.id.role == Role::kChief && options.num_ps == 0);
    if (e->code >= 128 && restartable && t.restarts < kMaxRestarts) {
      ++t.restarts;
      KeepEarlierLog(t.log);
      if (absl::Status s = Start(t, &by_pid); s.ok()) {
        ++running;
        t.log_read = 0;
        Say(absl::StrFormat("%-10s restarted pid %-7d (exit %d is retryable; restart %d of %d)",
                            t.id.ToString(), t.pid, e->code, t.restarts, kMaxRestarts));
        continue;
      } else {
        Say(absl::StrCat(t.id.ToString(), " could not be restarted: ", s.message()));
      }
    }
    if (e->code != 0) {
      // A task that ended with a failure for good was most likely told it
      // by the chief, which goes on telling the others for a few seconds:
      // the chief's own end, when it fails too, says why in its words.
      Task* failed = &t;
      int code = e->code;
      Task* chief = ChiefDutiesOf(tasks);
      if (code < 128 && chief != nullptr && chief != &t && chief->running) {
        const absl::Time until = absl::Now() + kChiefTellWait;
        while (chief->running && absl::Now() < until) {
          auto other = WaitAnyChild(absl::Milliseconds(200));
          if (!other.has_value()) continue;
          auto found = by_pid.find(other->pid);
          if (found == by_pid.end()) continue;
          found->second->running = false;
          --running;
          Relay(tasks);
          SayExited(*found->second, other->code);
          if (found->second == chief && other->code != 0) {
            failed = chief;
            code = other->code;
          }
        }
      }
      const std::string why = launcher::WhyFailed(failed->log);
      Say(absl::StrCat(failed->id.ToString(), " failed", why.empty() ? "" : ": ", why));
      Say(absl::StrCat("  log: ", failed->log, "; stopping the others"));
      StopAll(tasks, kStopGrace);
      return code;
    }
  }
  return kExitOk;
}

}  // namespace

int RunLaunch(const LaunchOptions& options) {
  const std::string logs = options.output_dir + "/logs";
  absl::Status s = MakeDirs(logs);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return CommandExitCode(s);
  }
  const int n = options.num_ps + options.num_workers + (options.with_chief ? 1 : 0) +
                (options.with_evaluator ? 1 : 0);
  auto ports = PickFreePorts(n);
  if (!ports.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ports.status().message()).c_str());
    return kExitRetryable;
  }
  std::vector<Task> tasks;
  const TfConfig base = ClusterOn(options, *ports, &tasks);
  WatchStopSignals([](int signo) { g_stop_signal.store(signo); });
  Say(absl::StrFormat("launching %d ps, %d workers%s%s%s; logs in %s/", options.num_ps,
                      options.num_workers, options.with_chief ? ", 1 chief" : "",
                      options.with_evaluator ? ", 1 evaluator" : "",
                      options.num_ps == 0 ? " (no ps: ring all-reduce)" : "", logs));
  std::map<pid_t, Task*> by_pid;
  for (Task& t : tasks) {
    t.log = absl::StrCat(logs, "/", RoleName(t.id.role), "-", t.id.index, ".log");
    KeepEarlierLog(t.log);
    t.spawn = SpawnFor(t, base, options);
    if (absl::Status started = Start(t, &by_pid); !started.ok()) {
      std::fprintf(stderr, "%s\n", std::string(started.message()).c_str());
      StopAll(tasks, kStopGrace);
      return kExitRetryable;
    }
    Say(absl::StrFormat("%-10s started   %-16s pid %-7d log %s", t.id.ToString(),
                        t.address.ToString(), t.pid, t.log));
  }
  const absl::Time deadline = options.timeout > absl::ZeroDuration() ? absl::Now() + options.timeout
                                                                     : absl::InfiniteFuture();
  const int result = AwaitTasks(tasks, by_pid, options, deadline);
  Relay(tasks);
  if (result != kExitOk) return result;
  auto metrics_text = ReadFile(options.output_dir + "/final_metrics.json");
  if (!metrics_text.ok()) {
    Say(absl::StrCat("every task ended, but the chief wrote no metrics: ",
                     metrics_text.status().message()));
    return kExitPermanent;
  }
  absl::StatusOr<std::vector<std::string>> report =
      launcher::FinalReport(*metrics_text, options.output_dir, logs);
  if (!report.ok()) {
    Say(std::string(report.status().message()));
    return kExitPermanent;
  }
  for (const std::string& line : *report) Say(line);
  return kExitOk;
}

}  // namespace pstrain
