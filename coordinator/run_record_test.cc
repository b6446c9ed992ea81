#include "coordinator/run_record.h"

#include <filesystem>

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<VariableDef> Mlp(int64_t hidden) {
  std::vector<VariableDef> v(4);
  v[0].name = "dense_0/kernel";
  v[0].shape = {784, hidden};
  v[1].name = "dense_0/bias";
  v[1].shape = {hidden};
  v[2].name = "dense_1/kernel";
  v[2].shape = {hidden, 10};
  v[3].name = "dense_1/bias";
  v[3].shape = {10};
  return v;
}

TEST(RunRecordTest, TheSameModelHasNoDifferences) {
  EXPECT_TRUE(
      ModelDifferences(DescribeModel(Mlp(128), "adam"), DescribeModel(Mlp(128), "adam")).empty());
}

TEST(RunRecordTest, EveryDifferenceIsNamed) {
  std::vector<VariableDef> now = Mlp(64);
  now.pop_back();  // dense_1/bias gone
  VariableDef table;
  table.name = "ids";
  table.shape = {1000, 8};
  table.embedding = true;
  now.push_back(table);
  EXPECT_THAT(ModelDifferences(DescribeModel(Mlp(128), "adam"), DescribeModel(now, "sgd")),
              ElementsAre("optimizer: adam on disk, sgd in this job",
                          "dense_0/kernel: shape [784, 128] on disk, shape [784, 64] in this job",
                          "dense_0/bias: shape [128] on disk, shape [64] in this job",
                          "dense_1/kernel: shape [128, 10] on disk, shape [64, 10] in this job",
                          "dense_1/bias: shape [10] on disk, not in this job",
                          "ids: not on disk, table [1000, 8] in this job"));
}

TEST(RunRecordTest, ARelaunchOfAnotherModelIsRefusedAndNothingChanges) {
  const std::string dir = pstrain::testing::TempDir() + "/relaunch";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  // No run.json yet: nothing to compare with.
  EXPECT_OK(CheckRelaunch(dir, DescribeModel(Mlp(128), "adam")));
  Json run = Json::object();
  run["flags"] = std::vector<std::string>{"--optimizer=adam"};
  run["model"] = DescribeModel(Mlp(128), "adam");
  ASSERT_OK(WriteRunStart(dir, run, absl::FromUnixSeconds(1795000000)));
  ASSERT_OK_AND_ASSIGN(const std::string before, ReadFile(dir + "/run.json"));
  EXPECT_OK(CheckRelaunch(dir, DescribeModel(Mlp(128), "adam")));
  absl::Status s = CheckRelaunch(dir, DescribeModel(Mlp(64), "adam"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            dir + " holds a run of another model (" + dir +
                "/run.json), and its checkpoints cannot be restored into this one: "
                "dense_0/kernel: shape [784, 128] on disk, shape [784, 64] in this job; "
                "dense_0/bias: shape [128] on disk, shape [64] in this job; "
                "dense_1/kernel: shape [128, 10] on disk, shape [64, 10] in this job. "
                "Nothing was changed. Relaunch with that run's flags and --model_config to "
                "resume it, or give a new --output_dir to start afresh");
  ASSERT_OK_AND_ASSIGN(const std::string after, ReadFile(dir + "/run.json"));
  EXPECT_EQ(after, before);
  // A damaged record is named, not overwritten.
  ASSERT_OK(WriteFileAtomically(dir + "/run.json", "{\"mod"));
  s = CheckRelaunch(dir, DescribeModel(Mlp(128), "adam"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(dir + "/run.json does not parse"));
}

TEST(RunRecordTest, LaunchesAreCountedAndTheEndIsRecorded) {
  const std::string dir = pstrain::testing::TempDir() + "/launches";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  Json run = Json::object();
  run["model"] = DescribeModel(Mlp(8), "sgd");
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

TEST(RunRecordTest, TheJobIsDescribedWithItsOptimizersSettings) {
  model::JobSpec job;
  job.optimizer.name = "adam";
  job.optimizer.learning_rate = 0.001f;
  job.batch_size = 64;
  const Json j = DescribeJob(job);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["optimizer"]["name"], "adam");
  EXPECT_FLOAT_EQ(j["optimizer"]["learning_rate"].get<float>(), 0.001f);
  EXPECT_FLOAT_EQ(j["optimizer"]["beta2"].get<float>(), 0.999f);
  EXPECT_EQ(j["consistency"], "async");
  EXPECT_EQ(j["wire_dtype"], "float32");
}

}  // namespace
}  // namespace pstrain::coordinator
