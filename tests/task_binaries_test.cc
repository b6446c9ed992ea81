// The per-role binaries (ps_server, worker, chief, evaluator) and `pstrain`
// as real processes: a binary runs only its own role, a crash prints a
// report with its stack to the task's log, SIGTERM still stops a task
// cleanly.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/subprocess.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/task_set.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Binary(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/", path);
}

std::string PsTfConfig(int ps_port, int worker_port, const std::string& type) {
  return absl::StrCat(R"({"cluster": {"ps": ["127.0.0.1:)", ps_port,
                      R"("], "worker": ["127.0.0.1:)", worker_port, R"("]}, "task": {"type": ")",
                      type, R"(", "index": 0}})");
}

// Starts `binary` as ps:0 and waits until it serves; returns its PID.
pid_t StartPs(const std::string& binary, const std::string& log) {
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(2);
  EXPECT_OK(ports);
  SpawnOptions o;
  o.argv = {binary};
  o.env = {{"TF_CONFIG", PsTfConfig((*ports)[0], (*ports)[1], "ps")}};
  o.log_path = log;
  absl::StatusOr<pid_t> pid = Spawn(o);
  EXPECT_OK(pid);
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return ReadFile(log).value_or("").find("serving on") != std::string::npos; },
      absl::Seconds(30)))
      << ReadFile(log).value_or("");
  return *pid;
}

// Lines "    @ 0x... name" of the report.
int FramesIn(const std::string& log) {
  int frames = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(line, "    @ 0x")) ++frames;
  }
  return frames;
}

class CrashReportTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Starts the binary as ps:0, sends it `signo` once it serves, and returns
  // its exit code (-1 if it did not end in 30 s) and its log.
  std::pair<int, std::string> SignalAServingPs(int signo) {
    const std::string log = absl::StrCat(pstrain::testing::TempDir(), "/signal-", signo, "-",
                                         GetParam().substr(0, 3), ".log");
    const pid_t pid = StartPs(Binary(GetParam()), log);
    // To the main thread: a signal to the process may land on a thread
    // that is still starting, whose stack has no frames of ours yet.
    ::syscall(SYS_tgkill, pid, pid, signo);
    std::optional<ChildExit> exit = WaitChild(pid, absl::Seconds(30));
    if (!exit.has_value()) SignalChild(pid, SIGKILL);
    return {exit.has_value() ? exit->code : -1, ReadFile(log).value_or("")};
  }
};

TEST_P(CrashReportTest, ASegfaultPrintsTheSignalAndAStackToTheTaskLog) {
  const auto [code, text] = SignalAServingPs(SIGSEGV);
  EXPECT_EQ(code, 128 + SIGSEGV);  // it still dies of the signal
  // The report: the stack of the thread the signal landed on (here the
  // main thread, waiting in a system call; base/crash_handler_test.cc
  // crashes in our own code and checks the frames by name), then Abseil's
  // summary.
  EXPECT_THAT(text, HasSubstr("*** SIGSEGV: stack of the crashing thread, innermost first:\n"
                              "    @ 0x"));
  EXPECT_GE(FramesIn(text), 3) << text;
  EXPECT_THAT(text, HasSubstr("*** SIGSEGV received at time="));
}

TEST_P(CrashReportTest, SigtermStillStopsTheTaskCleanlyWithoutAStack) {
  const auto [code, text] = SignalAServingPs(SIGTERM);
  EXPECT_EQ(code, 143);
  EXPECT_THAT(text, HasSubstr("stopping: signal 15"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("*** SIGTERM")));
}

INSTANTIATE_TEST_SUITE_P(PstrainAndPsServer, CrashReportTest,
                         ::testing::Values("pstrain", "ps_server/ps_server"));

TEST(TaskBinariesTest, ARoleBinaryRefusesATfConfigOfAnotherRole) {
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(2));
  for (const auto& [binary, role] : std::vector<std::pair<std::string, std::string>>{
           {"ps_server/ps_server", "ps"},
           {"worker/worker", "worker"},
           {"chief/chief", "chief"},
           {"evaluator/evaluator", "evaluator"}}) {
    const std::string log = absl::StrCat(pstrain::testing::TempDir(), "/", role, ".log");
    SpawnOptions o;
    o.argv = {Binary(binary)};
    const std::string other = role == "worker" ? "ps" : "worker";
    o.env = {{"TF_CONFIG", PsTfConfig(ports[0], ports[1], other)}};
    o.log_path = log;
    ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
    std::optional<ChildExit> exit = WaitChild(pid, absl::Seconds(30));
    ASSERT_TRUE(exit.has_value()) << binary;
    EXPECT_EQ(exit->code, 2) << binary;
    EXPECT_THAT(ReadFile(log).value_or(""),
                HasSubstr(absl::StrCat("TF_CONFIG task.type is \"", other,
                                       "\" but this binary runs the ", role,
                                       " role; use `pstrain` to run any role")));
  }
}

// --version (-V) and --help (-h) as `pstrain` takes them, after any flag
// and without a TF_CONFIG: what a platform's health check or a user
// trying the image's binaries runs first.
TEST(TaskBinariesTest, EveryRoleBinaryAnswersVersionAndHelp) {
  for (const auto& [binary, role] : std::vector<std::pair<std::string, std::string>>{
           {"ps_server/ps_server", "ps"},
           {"worker/worker", "worker"},
           {"chief/chief", "chief"},
           {"evaluator/evaluator", "evaluator"}}) {
    const std::string name = binary.substr(binary.find('/') + 1);
    for (const char* flag : {"--version", "-V", "--help", "-h"}) {
      const std::string log =
          absl::StrCat(pstrain::testing::TempDir(), "/", role, flag, ".log");
      SpawnOptions o;
      o.argv = {Binary(binary), "--epochs=2", flag};
      o.env = {{"TF_CONFIG", ""}};
      o.log_path = log;
      ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
      std::optional<ChildExit> exit = WaitChild(pid, absl::Seconds(30));
      ASSERT_TRUE(exit.has_value()) << binary;
      const std::string out = ReadFile(log).value_or("");
      EXPECT_EQ(exit->code, 0) << binary << " " << flag << ": " << out;
      if (absl::string_view(flag).find('V') != absl::string_view::npos ||
          absl::string_view(flag) == "--version") {
        EXPECT_THAT(out, ::testing::StartsWith(
                             absl::StrCat(name, ": the ", role, " role of pstrain 0.")));
        EXPECT_THAT(out, HasSubstr("\ncommit: "));
      } else {
        EXPECT_THAT(out, ::testing::StartsWith("usage: TF_CONFIG="));
        EXPECT_THAT(out, HasSubstr(absl::StrCat("runs the ", role, " task TF_CONFIG names")));
        EXPECT_THAT(out, HasSubstr("--output_dir"));
      }
    }
  }
}

}  // namespace
}  // namespace pstrain
