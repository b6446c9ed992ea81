#include "cli/experiment.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ExperimentModeTest, ModesBecomeJobFlags) {
  ASSERT_OK_AND_ASSIGN(ExperimentMode backup, ParseExperimentMode("sync+backup:1", 3));
  EXPECT_EQ(backup.dir, "sync_backup_1");
  EXPECT_EQ(backup.flags,
            (std::vector<std::string>{"--consistency=sync", "--replicas_to_aggregate=2"}));
  ASSERT_OK_AND_ASSIGN(ExperimentMode ssp, ParseExperimentMode("ssp:2", 3));
  EXPECT_EQ(ssp.flags, (std::vector<std::string>{"--consistency=ssp:2"}));
  EXPECT_EQ(ssp.dir, "ssp_2");
  EXPECT_EQ(ParseExperimentMode("sync+backup:3", 3).status().message(),
            "mode \"sync+backup:3\": backups must be from 1 to 2 with 3 training replicas");
  EXPECT_EQ(ParseExperimentMode("bsp", 3).status().message(),
            "mode \"bsp\": must be async, sync, sync+backup:K or ssp:S");
}

TEST(ExperimentModeTest, StalenessMeanAndP99FromTheHistogram) {
  // 90 at 0, 9 at 1, 1 in 5-8: mean (9 + 6.5) / 100; 99% reached at 1.
  StalenessSummary s = SummarizeStaleness({90, 9, 0, 0, 1, 0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(s.mean, 0.155);
  EXPECT_EQ(s.p99, 1);
  s = SummarizeStaleness({50, 0, 0, 0, 0, 0, 0, 0, 50});
  EXPECT_EQ(s.p99, 65);
  EXPECT_EQ(SummarizeStaleness({}).mean, 0);
}

}  // namespace
}  // namespace pstrain
