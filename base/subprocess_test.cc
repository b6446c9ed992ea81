#include "base/subprocess.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
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

TEST(SubprocessTest, PicksDistinctFreePortsOutsideTheEphemeralRange) {
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(8));
  std::set<int> unique(ports.begin(), ports.end());
  EXPECT_EQ(unique.size(), 8u);
  const auto [low, high] = EphemeralPortRange();
  ASSERT_GT(low, 10001) << "this machine's ephemeral range starts too low for the test";
  for (int p : ports) {
    EXPECT_GE(p, 10000);
    EXPECT_LT(p, low);
  }
  // Free: each can be bound now.
  for (int p : ports) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(p));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << p;
    ::close(fd);
  }
}

}  // namespace
}  // namespace pstrain
