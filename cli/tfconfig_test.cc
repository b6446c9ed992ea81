#include "cli/tfconfig.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(UaiTfConfigTest, FourNodes) {
  ASSERT_OK_AND_ASSIGN(std::vector<TfConfig> configs,
                       UaiTfConfigs({"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}, 2223, 2222));
  ASSERT_EQ(configs.size(), 1u + 4u + 3u);
  const char* cluster =
      R"({"cluster":{"master":["10.0.0.1:2222"],"ps":["10.0.0.1:2223","10.0.0.2:2223",)"
      R"("10.0.0.3:2223","10.0.0.4:2223"],"worker":["10.0.0.2:2222","10.0.0.3:2222",)"
      R"("10.0.0.4:2222"]},)";
  EXPECT_EQ(configs[0].ToJson(),
            absl::StrCat(cluster, R"("environment":"cloud","task":{"index":0,"type":"master"}})"));
  EXPECT_EQ(configs[4].ToJson(),
            absl::StrCat(cluster, R"("environment":"cloud","task":{"index":3,"type":"ps"}})"));
  EXPECT_EQ(configs[7].ToJson(),
            absl::StrCat(cluster, R"("environment":"cloud","task":{"index":2,"type":"worker"}})"));
  // Each parses back to itself, as every task reads it.
  for (const TfConfig& cfg : configs) {
    ASSERT_OK_AND_ASSIGN(TfConfig again, ParseTfConfig(cfg.ToJson()));
    EXPECT_EQ(again.ToJson(), cfg.ToJson());
    EXPECT_OK(ValidateForParameterServerTraining(again));
  }
}

TEST(UaiTfConfigTest, BadInputIsNamed) {
  EXPECT_EQ(UaiTfConfigs({"a"}, 1, 2).status().message(),
            "--nodes names 1 host(s); a UAI-Train job needs at least 2: node 0 runs the master "
            "and a PS, every other node a PS and a worker");
  EXPECT_EQ(UaiTfConfigs({"a", "a"}, 1, 2).status().message(), "--nodes names \"a\" twice");
  EXPECT_EQ(UaiTfConfigs({"a", "b"}, 5, 5).status().message(),
            "--ps-port and --worker-port are both 5: a node runs a PS and a worker");
  EXPECT_FALSE(UaiTfConfigs({"a", "b"}, 70000, 5).ok());
}

}  // namespace
}  // namespace pstrain
