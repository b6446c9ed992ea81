#include "launcher/task_logs.h"

#include <filesystem>
#include <fstream>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void Append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

TEST(TaskLogsTest, NewLinesAreReadWholeAndOnce) {
  const std::string log = pstrain::testing::FreshTempDir("new_lines") + "/w.log";
  int64_t offset = 0;
  EXPECT_EQ(ReadNewLines(log, &offset), "");  // not there yet
  Append(log, "one\ntw");
  EXPECT_EQ(ReadNewLines(log, &offset), "one\n");
  EXPECT_EQ(offset, 4);
  EXPECT_EQ(ReadNewLines(log, &offset), "");  // half a line waits
  Append(log, "o\nthree\n");
  EXPECT_EQ(ReadNewLines(log, &offset), "two\nthree\n");
  EXPECT_EQ(ReadNewLines(log, &offset), "");
}

TEST(TaskLogsTest, AnEarlierLogIsKeptUnderTheFirstFreeNumber) {
  const std::string dir = pstrain::testing::FreshTempDir("keep");
  KeepEarlierLog(dir + "/ps-0.log");  // none: nothing happens
  EXPECT_FALSE(std::filesystem::exists(dir + "/ps-0.1.log"));
  Append(dir + "/ps-0.log", "first run\n");
  Append(dir + "/ps-0.1.log", "older run\n");
  KeepEarlierLog(dir + "/ps-0.log");
  EXPECT_FALSE(std::filesystem::exists(dir + "/ps-0.log"));
  EXPECT_EQ(ReadFile(dir + "/ps-0.1.log").value_or(""), "older run\n");
  EXPECT_EQ(ReadFile(dir + "/ps-0.2.log").value_or(""), "first run\n");
}

TEST(TaskLogsTest, WhyFailedIsTheLastFailingLineLessTheLogsPrefix) {
  const std::string dir = pstrain::testing::FreshTempDir("why");
  Append(dir + "/a.log",
         "12:00:01.000 worker:1: started\n"
         "12:00:02.500 worker:1: pull failed: ps:0 unavailable\n"
         "12:00:03.000 worker:1: stopping\n");
  EXPECT_EQ(WhyFailed(dir + "/a.log"), "pull failed: ps:0 unavailable");
  Append(dir + "/b.log", "no prefix here\nthe last line\n\n");
  EXPECT_EQ(WhyFailed(dir + "/b.log"), "the last line");
  EXPECT_EQ(WhyFailed(dir + "/missing.log"), "");
}

TEST(TaskLogsTest, ProgressAndScoresAreRelayedAndTheRestIsNot) {
  const TaskId worker{Role::kWorker, 1};
  EXPECT_EQ(RelayedLine(worker,
                        "12:00:01.000 worker:1: step 200/1250 - loss 0.7 - accuracy 0.73 - "
                        "14918 examples/s - 0s elapsed - ETA 2s"),
            "worker:1   step 200/1250 - loss 0.7 - accuracy 0.73 - 14918 examples/s - 0s "
            "elapsed - ETA 2s");
  EXPECT_EQ(RelayedLine(worker, "12:00:01.000 worker:1: pulled 3 variables"), std::nullopt);
  EXPECT_EQ(RelayedLine({Role::kEvaluator, 0},
                        "12:00:04.000 evaluator:0: eval at step 3750: loss 0.43 - accuracy 0.84"),
            "evaluator: eval at step 3750: loss 0.43 - accuracy 0.84");
  EXPECT_EQ(RelayedLine({Role::kPs, 0}, "12:00:01.000 ps:0: step 1/2 - loss 1 - ETA 1s"),
            std::nullopt);
}

TEST(TaskLogsTest, TheFinalReportGivesAccuracyThroughputAndEachReplica) {
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> lines,
                       FinalReport(R"({"test_accuracy": 0.84471, "examples_per_sec": 43999.4,
                      "training_seconds": 2.71,
                      "replicas": [{"task": "chief:0", "examples_per_sec": 16222.2},
                                   {"task": "worker:0", "examples_per_sec": 19161}]})",
                                   "out", "out/logs"));
  EXPECT_THAT(lines,
              ElementsAre("test accuracy: 0.8447",
                          "training throughput: 43999 examples/s over 2.7 s of training (per "
                          "replica: chief:0 16222, worker:0 19161)",
                          "metrics: out/final_metrics.json; logs: out/logs/"));
  ASSERT_OK_AND_ASSIGN(
      lines, FinalReport(R"({"test_accuracy": 0.7, "test_auc": 0.81234})", "o", "o/logs"));
  EXPECT_THAT(lines, ElementsAre("test accuracy: 0.7000", "test auc: 0.8123",
                                 "metrics: o/final_metrics.json; logs: o/logs/"));
  absl::StatusOr<std::vector<std::string>> none = FinalReport(R"({"loss": 1})", "o", "o/logs");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no test_accuracy"));
  EXPECT_FALSE(FinalReport("not json", "o", "o/logs").ok());
}

}  // namespace
}  // namespace pstrain::launcher
