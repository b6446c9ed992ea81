#include "job/run_record.h"

#include <algorithm>
#include <filesystem>

#include "base/event_file.h"
#include "base/exit_codes.h"
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

TEST(RunRecordTest, JobFlagsAreTheJobsOwnAsGiven) {
  EXPECT_EQ(JobFlagsOf({"--epochs=3", "--bind=127.0.0.1:9", "--nopush_per_layer",
                        "--eval_poll_secs=1", "--hidden=16", "positional", "--nonesuch=1"}),
            (std::vector<std::string>{"--epochs=3", "--nopush_per_layer", "--hidden=16"}));
}

// How a task that starts after its job ended, or waits for tasks that
// have gone, learns the end from run.json: a good end whenever it came, a
// failure only from the task's own start on (an earlier launch's failure
// does not bind a relaunch), of this job only (its job flags as given and
// its cluster; per-task flags aside).
TEST(RunRecordTest, TheJobsEndIsReadBackForThatJobOnly) {
  const std::string dir = pstrain::testing::TempDir() + "/ended";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  const Json cluster = {{"chief", {"127.0.0.1:1"}}, {"ps", {"127.0.0.1:2"}}};
  const std::vector<std::string> flags = {"--epochs=3", "--ps_wait_s=60"};
  const std::vector<std::string> mine = {"--epochs=3", "--eval_poll_secs=1"};  // another role's
  const absl::Time start = absl::FromUnixSeconds(1795000000);
  EXPECT_EQ(EndedWell(dir, mine, cluster), std::nullopt);  // no run.json
  Json run = {{"flags", flags}, {"cluster", cluster}};
  run["model"] = DescribeModel(SoftmaxRegression(16), "sgd");
  ASSERT_OK(WriteRunStart(dir, run, start));
  EXPECT_EQ(EndedWell(dir, mine, cluster), std::nullopt);  // under way
  EXPECT_EQ(EndedBadly(dir, mine, cluster, start), std::nullopt);
  ASSERT_OK(WriteRunEnd(dir, absl::OkStatus(), start + absl::Seconds(30)));
  EXPECT_EQ(EndedWell(dir, mine, cluster), "2026-11-18T11:07:10Z");
  EXPECT_EQ(EndedBadly(dir, mine, cluster, start), std::nullopt);
  EXPECT_EQ(EndedWell(dir, {"--epochs=4"}, cluster), std::nullopt);  // another job
  EXPECT_EQ(EndedWell(dir, mine, Json{{"chief", {"127.0.0.1:7"}}}), std::nullopt);

  const absl::Status failed = WithFailureKind(
      absl::FailedPreconditionError("worker:0 runs another model"), FailureKind::kBadConfig);
  ASSERT_OK(WriteRunEnd(dir, failed, start + absl::Seconds(60)));
  EXPECT_EQ(EndedWell(dir, mine, cluster), std::nullopt);
  std::optional<absl::Status> bad = EndedBadly(dir, mine, cluster, start);
  ASSERT_TRUE(bad.has_value());
  EXPECT_THAT(bad->message(), HasSubstr("the job failed at 2026-11-18T11:07:40Z (exit 2): "
                                        "FAILED_PRECONDITION: worker:0 runs another model"));
  EXPECT_EQ(RoleExitCode(*bad, FailureKind::kPermanent), 2);
  // A task that started after that failure is of a relaunch: not bound.
  EXPECT_EQ(EndedBadly(dir, mine, cluster, start + absl::Seconds(62)), std::nullopt);
  // A retryable end is not the job's end.
  ASSERT_OK(WriteRunEnd(dir, absl::UnavailableError("ps:0 lost"), start + absl::Seconds(90)));
  EXPECT_EQ(EndedBadly(dir, mine, cluster, start), std::nullopt);
}

// A launch that fails before it begins records that on this job's run.json
// or a new one, never on another job's, and a relaunch is not refused for
// it.
TEST(RunRecordTest, AFailedLaunchIsRecordedOnThisJobsRecordOnly) {
  const std::string dir = pstrain::testing::TempDir() + "/failed_launch";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  const Json cluster = {{"chief", {"127.0.0.1:1"}}};
  const Json run = {{"flags", {"--epochs=3"}}, {"cluster", cluster}};
  const absl::Time at = absl::FromUnixSeconds(1795000000);
  const absl::Status why = WithFailureKind(absl::NotFoundError("cannot open data"),
                                           FailureKind::kBadConfig);
  ASSERT_OK_AND_ASSIGN(bool recorded, RecordFailedLaunch(dir, run, why, at));
  EXPECT_TRUE(recorded);
  ASSERT_TRUE(EndedBadly(dir, {"--epochs=3"}, cluster, at).has_value());
  EXPECT_OK(CheckRelaunch(dir, DescribeModel(SoftmaxRegression(16), "sgd")));
  // Another job's record is left as it is.
  Json other = {{"flags", {"--epochs=9"}}, {"cluster", cluster}};
  other["model"] = DescribeModel(SoftmaxRegression(16), "sgd");
  ASSERT_OK(WriteRunStart(dir, other, at));
  ASSERT_OK_AND_ASSIGN(const std::string before, ReadFile(dir + "/run.json"));
  ASSERT_OK_AND_ASSIGN(recorded, RecordFailedLaunch(dir, run, why, at + absl::Seconds(5)));
  EXPECT_FALSE(recorded);
  ASSERT_OK_AND_ASSIGN(const std::string after, ReadFile(dir + "/run.json"));
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace pstrain
