#include "common/subprocess.h"

#include <signal.h>

#include <cstdlib>
#include <set>

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string TmpDir() { return testing::TempDir(); }

TEST(SubprocessTest, RunsWithEnvironmentAndLogsOutput) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"hello $PSTRAIN_X\"; exit 3"};
  o.env = {{"PSTRAIN_X", "world"}};
  o.log_path = TmpDir() + "/child.log";
  ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
  auto exit = WaitChild(pid, absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 3);
  ASSERT_OK_AND_ASSIGN(std::string log, ReadFile(o.log_path));
  EXPECT_EQ(log, "hello world\n");
}

TEST(SubprocessTest, KilledChildReportsSignal) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
  EXPECT_FALSE(WaitChild(pid, absl::Milliseconds(100)).has_value());
  SignalChild(pid, SIGKILL);
  auto exit = WaitChild(pid, absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 128 + SIGKILL);
}

TEST(SubprocessTest, MissingProgramExits127) {
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
  auto exit = WaitChild(pid, absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 127);
}

TEST(SubprocessTest, PicksDistinctFreePorts) {
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(8));
  std::set<int> unique(ports.begin(), ports.end());
  EXPECT_EQ(unique.size(), 8u);
  for (int p : ports) EXPECT_GT(p, 0);
}

}  // namespace
}  // namespace pstrain
