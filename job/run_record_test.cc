#include "job/run_record.h"

#include <filesystem>

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// Softmax regression on `inputs` features: a kernel and a bias.
std::vector<VariableDef> SoftmaxRegression(int64_t inputs) {
  VariableDef kernel;
  kernel.name = "dense_0/kernel";
  kernel.shape = {inputs, 10};
  VariableDef bias;
  bias.name = "dense_0/bias";
  bias.shape = {10};
  return {kernel, bias};
}

TEST(RunRecordTest, ARelaunchOfAnotherModelIsRefusedAndNothingChanges) {
  const std::string dir = pstrain::testing::TempDir() + "/relaunch";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  // No run.json yet: nothing to compare with.
  EXPECT_OK(CheckRelaunch(dir, DescribeModel(SoftmaxRegression(128), "adam")));
  Json run = Json::object();
  run["flags"] = std::vector<std::string>{"--optimizer=adam"};
  run["model"] = DescribeModel(SoftmaxRegression(128), "adam");
  ASSERT_OK(WriteRunStart(dir, run, absl::FromUnixSeconds(1795000000)));
  ASSERT_OK_AND_ASSIGN(const std::string before, ReadFile(dir + "/run.json"));
  EXPECT_OK(CheckRelaunch(dir, DescribeModel(SoftmaxRegression(128), "adam")));
  absl::Status s = CheckRelaunch(dir, DescribeModel(SoftmaxRegression(64), "adam"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            dir + " holds a run of another model (" + dir +
                "/run.json), and its checkpoints cannot be restored into this one: "
                "dense_0/kernel: shape [128, 10] on disk, shape [64, 10] in this job. "
                "Nothing was changed. Relaunch with that run's flags and --model_config to "
                "resume it, or give a new --output_dir to start afresh");
  ASSERT_OK_AND_ASSIGN(const std::string after, ReadFile(dir + "/run.json"));
  EXPECT_EQ(after, before);
  // A damaged record is named, not overwritten.
  ASSERT_OK(WriteFileAtomically(dir + "/run.json", "{\"mod"));
  s = CheckRelaunch(dir, DescribeModel(SoftmaxRegression(128), "adam"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(dir + "/run.json does not parse"));
}

TEST(RunRecordTest, LaunchesAreCountedAndTheEndIsRecorded) {
  const std::string dir = pstrain::testing::TempDir() + "/launches";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  Json run = Json::object();
  run["model"] = DescribeModel(SoftmaxRegression(8), "sgd");
  ASSERT_OK(WriteRunStart(dir, run, absl::FromUnixSeconds(1795000000)));
  ASSERT_OK(WriteRunEnd(dir, absl::OkStatus(), absl::FromUnixSeconds(1795000060)));
  ASSERT_OK(WriteRunStart(dir, run, absl::FromUnixSeconds(1795000100)));
  ASSERT_OK(
      WriteRunEnd(dir, absl::UnavailableError("ps:0 lost"), absl::FromUnixSeconds(1795000200)));
  ASSERT_OK_AND_ASSIGN(const std::string text, ReadFile(dir + "/run.json"));
  ASSERT_OK_AND_ASSIGN(const Json j, ParseJson(text));
  EXPECT_EQ(j["launches"], 2);
  EXPECT_EQ(j["first_started"], "2026-11-18T11:06:40Z");
  EXPECT_EQ(j["started"], "2026-11-18T11:08:20Z");
  EXPECT_EQ(j["ended"], "2026-11-18T11:10:00Z");
  EXPECT_EQ(j["outcome"], "UNAVAILABLE: ps:0 lost");
}

}  // namespace
}  // namespace pstrain
