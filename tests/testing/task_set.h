// The processes of a test cluster, by task name ("ps:1", "worker-0"...):
// started with Spawn, killed with SIGKILL by PID, waited for with a bound.
// Whatever is still running when the set is destroyed is killed. testonly;
// thread-compatible.
#ifndef PSTRAIN_TESTS_TESTING_TASK_SET_H_
#define PSTRAIN_TESTS_TESTING_TASK_SET_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/testing/wait_until.h"
#include "base/subprocess.h"

namespace pstrain::testing {

class TaskSet {
 public:
  TaskSet() = default;
  TaskSet(const TaskSet&) = delete;
  TaskSet& operator=(const TaskSet&) = delete;
  ~TaskSet();

  // Starts `name` (replacing a finished one of that name).
  absl::Status Start(const std::string& name, const SpawnOptions& options);

  // SIGKILL, then reaped (10 s at most).
  void Kill(const std::string& name);
  // Sends `signo` to `name`, which is left to end (WaitAll reaps it).
  void Signal(const std::string& name, int signo);
  // Kill() for every task still running.
  void KillAll();

  // Waits for every task still running, `timeout` in all; one still
  // running then is a test failure and gets SIGKILL. Exit codes by name
  // (-1: not reaped).
  std::map<std::string, int> WaitAll(absl::Duration timeout);

 private:
  std::map<std::string, pid_t> pids_;
};


}  // namespace pstrain::testing

#endif  // PSTRAIN_TESTS_TESTING_TASK_SET_H_
