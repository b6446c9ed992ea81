#include "job/run_record.h"

#include <algorithm>
#include <filesystem>

#include "base/event_file.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
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

// TensorBoard's HParams tab reads the run's settings and outcome from the
// event files at the top of its directory.
TEST(RunRecordTest, StartAndEndAreHparamsSessionsForTensorBoard) {
  const std::string dir = pstrain::testing::TempDir() + "/hparams";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  Json run = Json::object();
  run["model"] = DescribeModel(SoftmaxRegression(8), "adam");
  run["job"] = Json{{"batch_size", 32},
                    {"learning_rate", 0.5},
                    {"optimizer", "adam"},
                    {"sync", false},
                    {"input", Json::object()}};
  run["cluster"] = Json{{"chief", {"a:1"}}, {"worker", {"b:1", "c:1"}}, {"ps", {"d:1", "e:1"}}};
  ASSERT_OK(WriteRunStart(dir, run, absl::FromUnixSeconds(1795000000)));
  ASSERT_OK(WriteRunEnd(dir, absl::OkStatus(), absl::FromUnixSeconds(1795000060)));
  std::vector<EventRecord::PluginValue> values;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);  // the start's and the end's, neither overwritten
  for (const std::string& f : files) {
    ASSERT_OK_AND_ASSIGN(std::vector<EventRecord> records, ReadEventFile(f));
    for (const EventRecord& r : records) {
      values.insert(values.end(), r.plugin_values.begin(), r.plugin_values.end());
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/scalars.jsonl"));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].tag, "_hparams_/session_start_info");
  EXPECT_EQ(values[0].plugin, "hparams");
  events::HParamsPluginData start;
  ASSERT_TRUE(start.ParseFromString(values[0].content));
  const auto& h = start.session_start_info().hparams();
  EXPECT_EQ(h.at("batch_size").number_value(), 32);
  EXPECT_EQ(h.at("learning_rate").number_value(), 0.5);
  EXPECT_EQ(h.at("optimizer").string_value(), "adam");
  EXPECT_FALSE(h.at("sync").bool_value());
  EXPECT_EQ(h.count("input"), 0u);  // not a scalar setting
  EXPECT_EQ(h.at("ps").number_value(), 2);
  EXPECT_EQ(h.at("replicas").number_value(), 3);
  EXPECT_EQ(h.at("parameters").number_value(), 8 * 10 + 10);
  EXPECT_EQ(start.session_start_info().start_time_secs(), 1795000000);
  EXPECT_EQ(values[1].tag, "_hparams_/session_end_info");
  events::HParamsPluginData end;
  ASSERT_TRUE(end.ParseFromString(values[1].content));
  EXPECT_EQ(end.session_end_info().status(), 1);  // success
  EXPECT_EQ(end.session_end_info().end_time_secs(), 1795000060);
}

}  // namespace
}  // namespace pstrain
