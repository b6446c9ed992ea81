#include "tests/testing/task_set.h"

#include <signal.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain::testing {

TaskSet::~TaskSet() { KillAll(); }

void TaskSet::KillAll() {
  for (auto& [name, pid] : pids_) SignalChild(pid, SIGKILL);
  for (auto& [name, pid] : pids_) WaitChild(pid, absl::Seconds(10));
  pids_.clear();
}

absl::Status TaskSet::Start(const std::string& name, const SpawnOptions& options) {
  auto pid = Spawn(options);
  if (!pid.ok()) return pid.status();
  pids_[name] = *pid;
  return absl::OkStatus();
}

void TaskSet::Kill(const std::string& name) {
  auto it = pids_.find(name);
  if (it == pids_.end()) return;
  SignalChild(it->second, SIGKILL);
  EXPECT_TRUE(WaitChild(it->second, absl::Seconds(10)).has_value()) << name;
  pids_.erase(it);
}

void TaskSet::Signal(const std::string& name, int signo) {
  auto it = pids_.find(name);
  if (it != pids_.end()) SignalChild(it->second, signo);
}

std::map<std::string, int> TaskSet::WaitAll(absl::Duration timeout) {
  std::map<std::string, int> codes;
  const absl::Time deadline = absl::Now() + timeout;
  for (auto& [name, pid] : pids_) {
    auto e = WaitChild(pid, std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!e.has_value()) {
      ADD_FAILURE() << name << " still running after " << timeout;
      SignalChild(pid, SIGKILL);
      e = WaitChild(pid, absl::Seconds(10));
    }
    codes[name] = e.has_value() ? e->code : -1;
  }
  pids_.clear();
  return codes;
}

}  // namespace pstrain::testing
