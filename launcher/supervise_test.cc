#include "launcher/supervise.h"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/file_util.h"
#include "base/testing/temp_dir.h"
#include "base/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A task that records each start in `runs` and exits with the code its
// turn gives: codes[0] on the first start, codes[1] on the second, ...
// (the last code once the list runs out).
SuperviseOptions Task(const std::string& runs, const std::vector<int>& codes,
                      std::vector<std::string>* log) {
  std::string script = absl::StrCat("echo run >> ", runs, "; n=$(wc -l < ", runs, "); ");
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    absl::StrAppend(&script, "[ $n -eq ", i + 1, " ] && exit ", codes[i], "; ");
  }
  absl::StrAppend(&script, "exit ", codes.back());
  SuperviseOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.first_backoff = absl::Milliseconds(1);
  o.log = [log](absl::string_view line) { log->emplace_back(line); };
  return o;
}

int Runs(const std::string& runs) {
  const std::string text = ReadFile(runs).value_or("");
  return static_cast<int>(
      std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty())).size());
}

TEST(SuperviseTest, RetryableExitsAreRestartedUntilTheTaskSucceeds) {
  const std::string runs = testing::FreshTempDir("retryable") + "/runs";
  std::vector<std::string> log;
  // A lost peer (138), then killed by SIGKILL (137), then done.
  EXPECT_EQ(Supervise(Task(runs, {138, 137, 0}, &log)), 0);
  EXPECT_EQ(Runs(runs), 3);
  EXPECT_THAT(log, ElementsAre("exit 138 (retryable): restart 1 of 3 in 1ms",
                               "exit 137 (retryable): restart 2 of 3 in 2ms"));
}

TEST(SuperviseTest, APermanentExitEndsAtOnceWithItsCode) {
  for (int code : {1, 2, 127}) {
    const std::string runs = testing::FreshTempDir(absl::StrCat("permanent", code)) + "/runs";
    std::vector<std::string> log;
    EXPECT_EQ(Supervise(Task(runs, {code}, &log)), code);
    EXPECT_EQ(Runs(runs), 1);
    EXPECT_THAT(
        log, ElementsAre(absl::StrCat("exit ", code,
                                      " is permanent (bad configuration or data): not restarted")));
  }
  // A retryable exit, then a permanent one: not restarted after it.
  const std::string runs = testing::FreshTempDir("then_permanent") + "/runs";
  std::vector<std::string> log;
  EXPECT_EQ(Supervise(Task(runs, {138, 2, 0}, &log)), 2);
  EXPECT_EQ(Runs(runs), 2);
}

TEST(SuperviseTest, RestartsAreBoundedAndBackOff) {
  const std::string runs = testing::FreshTempDir("bounded") + "/runs";
  std::vector<std::string> log;
  SuperviseOptions o = Task(runs, {138}, &log);
  o.restarts = 2;
  o.max_backoff = absl::Milliseconds(2);
  EXPECT_EQ(Supervise(o), 138);
  EXPECT_EQ(Runs(runs), 3);
  EXPECT_THAT(log, ElementsAre("exit 138 (retryable): restart 1 of 2 in 1ms",
                               "exit 138 (retryable): restart 2 of 2 in 2ms",
                               "exit 138 (retryable), and the 2 restarts allowed are "
                               "used up"));
}

TEST(SuperviseTest, AStopIsPassedOnAndNotRestarted) {
  const std::string dir = testing::FreshTempDir("stop");
  std::vector<std::string> log;
  std::atomic<int> stop{0};
  SuperviseOptions o;
  // The task exits 143 on SIGTERM, as pstrain's roles do.
  o.argv = {
      "/bin/sh", "-c",
      absl::StrCat("trap 'exit 143' TERM; echo up > ", dir,
                   "/up; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 0")};
  o.stop = &stop;
  o.log = [&log](absl::string_view line) { log.emplace_back(line); };
  std::thread stopper([&] {
    testing::WaitUntil([&] { return std::filesystem::exists(dir + "/up"); }, absl::Seconds(20));
    stop.store(SIGTERM);
  });
  const absl::Time start = absl::Now();
  EXPECT_EQ(Supervise(o), 143);
  stopper.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_THAT(log, ElementsAre("the task exited 143 after signal 15: not restarted"));

  // A stop while waiting to restart ends the wait and the supervisor.
  const std::string runs = dir + "/runs";
  log.clear();
  std::atomic<int> later{0};
  std::atomic<int> lines{0};
  SuperviseOptions waiting = Task(runs, {138}, &log);
  waiting.first_backoff = absl::Seconds(60);
  waiting.stop = &later;
  waiting.log = [&log, &lines](absl::string_view line) {
    log.emplace_back(line);
    lines.fetch_add(1);
  };
  std::thread stop_in_wait([&] {
    testing::WaitUntil([&] { return lines.load() == 1; }, absl::Seconds(20));
    later.store(SIGTERM);
  });
  const absl::Time wait_start = absl::Now();
  EXPECT_EQ(Supervise(waiting), 138);
  stop_in_wait.join();
  EXPECT_LT(absl::Now() - wait_start, absl::Seconds(20));
  EXPECT_EQ(Runs(runs), 1);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1], "signal 15 while waiting: not restarted");
}

TEST(SuperviseTest, ATaskThatCannotStartIsPermanent) {
  std::vector<std::string> log;
  SuperviseOptions o;
  o.argv = {"/nonexistent/pstrain"};
  o.log = [&log](absl::string_view line) { log.emplace_back(line); };
  // exec fails in the child: 127, permanent.
  EXPECT_EQ(Supervise(o), 127);
  EXPECT_THAT(log, ElementsAre(HasSubstr("exit 127 is permanent")));
}

}  // namespace
}  // namespace pstrain
