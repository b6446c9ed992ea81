#include "base/cpu_limit.h"

#include <sched.h>

#include <filesystem>
#include <string>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

class CpuLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = pstrain::testing::TempDir() + "/cgroup-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void Write(const std::string& rel, const std::string& text) {
    const std::string path = root_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    ASSERT_OK(WriteFileAtomically(path, text));
  }
  std::string root_;
};

TEST_F(CpuLimitTest, V2TakesTheTightestQuotaOnThePathUpToTheRootRoundedUp) {
  Write("kubepods/pod1/c1/cpu.max", "max 100000\n");
  Write("kubepods/pod1/cpu.max", "150000 100000\n");  // 1.5 cores
  Write("kubepods/cpu.max", "400000 100000\n");
  Write("cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/kubepods/pod1/c1\n", root_), 2);
}

TEST_F(CpuLimitTest, V2WithoutAQuotaAnywhereIsNoLimit) {
  Write("a/cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/a\n", root_), std::nullopt);
  // No files at all (cgroup fs not mounted) is no limit too.
  EXPECT_EQ(CgroupCpuQuotaCores("0::/b\n", root_ + "/missing"), std::nullopt);
}

TEST_F(CpuLimitTest, V1ReadsTheCfsQuotaOfTheCpuController) {
  Write("cpu,cpuacct/docker/x/cpu.cfs_quota_us", "50000\n");
  Write("cpu,cpuacct/docker/x/cpu.cfs_period_us", "100000\n");
  Write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  Write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const std::string cgroup =
      "5:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n3:cpuset:/docker/x\n0::/\n";
  EXPECT_EQ(CgroupCpuQuotaCores(cgroup, root_), 1);  // half a core is one
}

TEST_F(CpuLimitTest, V1InsideAContainerFindsItsOwnCgroupAtTheMountRoot) {
  // /proc/self/cgroup names the host's path; the container mounts its own
  // cgroup as the root of the hierarchy.
  Write("cpu/cpu.cfs_quota_us", "300000\n");
  Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("1:cpu:/docker/abc\n2:cpuacct:/docker/abc\n", root_), 3);
}

TEST_F(CpuLimitTest, MalformedFilesAreNoLimit) {
  Write("cpu.max", "lots 100000\n");
  Write("g/cpu.max", "100000\n");
  EXPECT_EQ(CgroupCpuQuotaCores("0::/g\n", root_), std::nullopt);
  EXPECT_EQ(CgroupCpuQuotaCores("garbage\n", root_), std::nullopt);
}

TEST(UsableCoresTest, IsAtLeastOneAndAtMostTheAffinityMask) {
  const int cores = UsableCores();
  EXPECT_GE(cores, 1);
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_LE(cores, CPU_COUNT(&set));
}

}  // namespace
}  // namespace pstrain
