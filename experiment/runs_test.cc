#include "experiment/runs.h"

#include <filesystem>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "experiment/plots.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::experiment {
namespace {

using ::testing::HasSubstr;

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
  EXPECT_EQ(ssp.num_ps, -1);  // the experiment's --ps
  ASSERT_OK_AND_ASSIGN(ExperimentMode allreduce, ParseExperimentMode("allreduce", 3));
  EXPECT_EQ(allreduce.flags, std::vector<std::string>{});  // sync is the only consistency there
  EXPECT_EQ(allreduce.num_ps, 0);
  EXPECT_EQ(allreduce.dir, "allreduce");
  EXPECT_EQ(ParseExperimentMode("bsp", 3).status().message(),
            "mode \"bsp\": must be async, sync, sync+backup:K, ssp:S or allreduce");
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

// A run's directory as a finished launch leaves it: the chief's metrics
// and the evaluator's scalars (out of step order, one line torn).
std::string WriteRunDir(const std::string& name) {
  const std::string dir = pstrain::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  EXPECT_OK(MakeDirs(dir + "/eval"));
  EXPECT_OK(WriteFileAtomically(dir + "/final_metrics.json", R"({
      "test_accuracy": 0.85, "examples_per_sec": 30000, "dropped_gradients": 4,
      "global_step": 1000, "examples": 96000,
      "staleness_histogram": [90, 9, 0, 0, 1, 0, 0, 0, 0],
      "replicas": [{"replica": 1, "steps": 400, "examples": 12800, "examples_per_sec": 9000},
                   {"replica": 0, "steps": 500, "examples": 16000, "examples_per_sec": 8000}]})"));
  EXPECT_OK(WriteFileAtomically(dir + "/eval/scalars.jsonl",
                                "{\"wall_time\": 1005.5, \"step\": 600, \"loss\": 0.5, "
                                "\"accuracy\": 0.81}\n"
                                "{\"wall_time\": 1002.0, \"step\": 200, \"loss\": 0.9, "
                                "\"accuracy\": 0.70}\n"
                                "{\"wall_time\": 1008.0, \"step\": 1000, \"loss\": 0.4, "
                                "\"accuracy\": 0.85}\n"
                                "{\"wall_time\": 10"));
  return dir;
}

TEST(ExperimentRunsTest, ARunIsReadFromItsMetricsAndScalars) {
  const std::string dir = WriteRunDir("read_run");
  ExperimentRun run;
  ASSERT_OK(ReadRun(dir, 1000.0, 0.80, &run));
  EXPECT_EQ(run.test_accuracy, 0.85);
  EXPECT_EQ(run.examples_per_sec, 30000);
  EXPECT_EQ(run.dropped, 4);
  EXPECT_DOUBLE_EQ(run.examples_per_step, 96);
  // Replica 0: 16000 examples at 8000/s over 500 steps.
  EXPECT_DOUBLE_EQ(run.ms_per_step, 4.0);
  ASSERT_EQ(run.evals.size(), 3u);
  EXPECT_EQ(run.evals[0].step, 200);
  EXPECT_DOUBLE_EQ(run.evals[0].wall_s, 2.0);
  EXPECT_EQ(run.evals[2].step, 1000);
  EXPECT_DOUBLE_EQ(run.time_to_target, 5.5);  // the first at or above 0.80
  EXPECT_EQ(run.staleness.size(), 9u);

  ExperimentRun missing;
  EXPECT_FALSE(ReadRun(dir + "/nothing", 0, 0.8, &missing).ok());
}

TEST(ExperimentRunsTest, TheCsvHasARowPerEvaluationAndTheSummaryTheMedians) {
  const std::string dir = WriteRunDir("tables");
  ExperimentRun a, b;
  ASSERT_OK(ReadRun(dir, 1000.0, 0.80, &a));
  ASSERT_OK(ReadRun(dir, 1000.0, 0.90, &b));  // never reaches 0.90
  a.mode = b.mode = "async";
  a.repeat = 1;
  b.repeat = 2;
  a.seconds = 10;
  b.seconds = 12;
  const std::string csv = RunsCsv({a, b});
  EXPECT_THAT(csv, HasSubstr("mode,repeat,global_step,wall_s,eval_loss,eval_accuracy,"
                             "staleness_mean,staleness_p99\n"));
  EXPECT_THAT(csv, HasSubstr("async,1,200,2.000,0.90000,0.70000,0.155,1\n"));
  EXPECT_THAT(csv, HasSubstr("async,2,1000,8.000,0.40000,0.85000,0.155,1\n"));
  ASSERT_OK_AND_ASSIGN(ExperimentMode async, ParseExperimentMode("async", 3));
  ASSERT_OK_AND_ASSIGN(ExperimentMode sync, ParseExperimentMode("sync", 3));
  const std::string md = SummaryTable({async, sync}, {a, b}, 0.80);
  EXPECT_THAT(md, HasSubstr("| mode | runs | time to accuracy 0.80 (s) |"));
  EXPECT_THAT(md, HasSubstr("| async | 2 | 5.5 (1 never) | 0.8500 | 4.0 | 30000 | 4 | 0.15 | 1 | "
                            "11.0 |\n"));
  EXPECT_THAT(md, HasSubstr("| sync | 0 | not reached |"));
}

TEST(ExperimentRunsTest, AnAllReduceRunsStepTimeComesFromItsTrainingSeconds) {
  const std::string dir = pstrain::testing::TempDir() + "/allreduce_run";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/eval");
  ASSERT_OK(WriteFileAtomically(
      dir + "/final_metrics.json",
      R"({"mode": "allreduce", "global_step": 625, "examples": 60000, "examples_per_sec": 140000,)"
      R"( "training_seconds": 0.5, "test_accuracy": 0.8148, "num_replicas": 3})"));
  ASSERT_OK(WriteFileAtomically(dir + "/eval/scalars.jsonl",
                                R"({"wall_time": 1001.5, "step": 625, "loss": 0.53, "accuracy": 0.8148})"
                                "\n"));
  ExperimentRun run;
  ASSERT_OK(ReadRun(dir, 1000.0, 0.80, &run));
  EXPECT_DOUBLE_EQ(run.ms_per_step, 0.8);  // 500 ms over 625 steps
  EXPECT_DOUBLE_EQ(run.test_accuracy, 0.8148);
  EXPECT_DOUBLE_EQ(run.time_to_target, 1.5);
  EXPECT_TRUE(run.staleness.empty());
}

TEST(ExperimentPlotsTest, ThePlotFilesHoldEachModesCurveAndStalenessShares) {
  const std::string run_dir = WriteRunDir("plots_run");
  ExperimentRun run;
  ASSERT_OK(ReadRun(run_dir, 1000.0, 0.80, &run));
  run.mode = "ssp:2";
  ASSERT_OK_AND_ASSIGN(ExperimentMode ssp, ParseExperimentMode("ssp:2", 3));
  const std::string dir = pstrain::testing::TempDir() + "/plots";
  std::filesystem::remove_all(dir);
  ASSERT_OK(WritePlotFiles(dir, {ssp}, {run}));
  // Wall time, step, accuracy, loss, examples (96 per global step).
  ASSERT_OK_AND_ASSIGN(std::string curve, ReadFile(dir + "/data/ssp_2.csv"));
  EXPECT_EQ(curve,
            "2.000,200,0.70000,0.90000,19200\n"
            "5.500,600,0.81000,0.50000,57600\n"
            "8.000,1000,0.85000,0.40000,96000\n");
  ASSERT_OK_AND_ASSIGN(std::string shares, ReadFile(dir + "/data/staleness.csv"));
  EXPECT_THAT(shares, HasSubstr("# bucket,ssp:2\n0,0.90000\n1,0.09000\n2,0.00000\n"));
  ASSERT_OK_AND_ASSIGN(std::string script, ReadFile(dir + "/plots.gp"));
  EXPECT_THAT(script, HasSubstr("set yrange [0.80:*]"));  // 0.85 less 0.05
  EXPECT_THAT(script, HasSubstr("set output \"" + dir + "/staleness.png\""));
  EXPECT_THAT(script, HasSubstr(dir + "/data/ssp_2.csv\" using 1:3 with linespoints title "
                                      "\"ssp:2\""));
}

}  // namespace
}  // namespace pstrain::experiment
