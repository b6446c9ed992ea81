// Clusters without ps, as users start them: one pstrain process per task
// from its TF_CONFIG, the replicas joined by ring all-reduce on loopback.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "base/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fashion_mnist.h"
#include "tests/testing/streamed_csv.h"
#include "tests/testing/task_set.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Pstrain() { return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/pstrain"); }

std::string TmpDir(const std::string& name) {
  std::string dir = absl::StrCat(::pstrain::testing::TempDir(), "/", name);
  EXPECT_OK(MakeDirs(dir));
  return dir;
}

// A cluster of `chiefs` (0 or 1) chief, `workers` workers and `evaluators`
// (0 or 1) evaluator on free loopback ports; TF_CONFIG of each task.
struct Cluster {
  std::string json;
  std::string TfConfig(const std::string& type, int index) const {
    return absl::StrCat(R"({"cluster": )", json, R"(, "task": {"type": ")", type,
                        R"(", "index": )", index, "}}");
  }
};

Cluster MakeCluster(int chiefs, int workers, int evaluators) {
  std::vector<int> ports = PickFreePorts(chiefs + workers + evaluators).value();
  auto address = [&](int i) { return absl::StrCat(R"(")", "127.0.0.1:", ports[i], R"(")"); };
  std::string json = "{";
  int at = 0;
  if (chiefs > 0) json += absl::StrCat(R"("chief": [)", address(at++), "], ");
  json += R"("worker": [)";
  for (int w = 0; w < workers; ++w) json += absl::StrCat(w > 0 ? ", " : "", address(at++));
  json += "]";
  if (evaluators > 0) json += absl::StrCat(R"(, "evaluator": [)", address(at++), "]");
  json += "}";
  return {json};
}

SpawnOptions Task(const Cluster& cluster, const std::string& type, int index,
                  const std::vector<std::string>& args, const std::string& log) {
  SpawnOptions o;
  o.argv = {Pstrain()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env = {{"TF_CONFIG", cluster.TfConfig(type, index)}, {"OPENBLAS_NUM_THREADS", "1"}};
  o.log_path = log;
  return o;
}

// The logs of RunThree's tasks, by name, under `out`.
std::map<std::string, std::string> ThreeLogs(const std::string& out) {
  return {{"chief", out + "/chief.log"}, {"worker:0", out + "/w0.log"},
          {"evaluator", out + "/eval.log"}};
}

// Starts the evaluator, the chief and worker:0 of `cluster` (MakeCluster(1,
// 1, 1)), each with `args` and its log of `logs`, and waits up to 60 s for
// them all to exit: each one's exit code by name, and how long that took.
std::pair<std::map<std::string, int>, absl::Duration> RunThree(
    const Cluster& cluster, const std::vector<std::string>& args,
    const std::map<std::string, std::string>& logs) {
  testing::TaskSet tasks;
  const absl::Time start = absl::Now();
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"evaluator", "evaluator"}, {"chief", "chief"}, {"worker:0", "worker"}}) {
    EXPECT_OK(tasks.Start(name, Task(cluster, type, 0, args, logs.at(name))));
  }
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(60));
  return {codes, absl::Now() - start};
}

Json ReadJson(const std::string& path) {
  auto text = ReadFile(path);
  EXPECT_OK(text.status()) << path;
  if (!text.ok()) return Json::object();
  auto parsed = ParseJson(*text);
  EXPECT_OK(parsed.status()) << path;
  return parsed.ok() ? *parsed : Json::object();
}

// TensorFlow's distributed-training guide: two workers, no chief, no ps.
TEST(AllReduceClusterTest, TheGuidesTwoWorkersTrainAndEveryTaskExitsZero) {
  const std::string out = TmpDir("guide");
  const Cluster cluster = MakeCluster(0, 2, 0);
  // With the cluster token a job off loopback needs: the replicas present it.
  ASSERT_OK(WriteFileAtomically(out + "/token", "guide-cluster-token-0123456789abcdef\n"));
  const std::vector<std::string> args = {"--epochs=1", "--output_dir=" + out,
                                         "--token_file=" + out + "/token"};
  testing::TaskSet tasks;
  for (int w = 0; w < 2; ++w) {
    ASSERT_OK(tasks.Start(absl::StrCat("worker:", w),
                          Task(cluster, "worker", w, args, absl::StrCat(out, "/w", w, ".log"))));
  }
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(120));
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(codes[absl::StrCat("worker:", w)], 0)
        << ReadFile(absl::StrCat(out, "/w", w, ".log")).value_or("");
  }
  ASSERT_OK_AND_ASSIGN(std::string w0, ReadFile(out + "/w0.log"));
  EXPECT_THAT(w0, HasSubstr("2 replicas train by ring all-reduce"));
  EXPECT_THAT(w0, HasSubstr("every replica holds the same model after step 937"));
  EXPECT_THAT(w0, HasSubstr("test accuracy: "));
  const Json metrics = ReadJson(out + "/final_metrics.json");
  EXPECT_EQ(FindMember(metrics, "mode")->get<std::string>(), "allreduce");
  EXPECT_EQ(FindMember(metrics, "num_replicas")->get<double>(), 2);
  EXPECT_EQ(FindMember(metrics, "global_step")->get<double>(), 937);
  EXPECT_GE(FindMember(metrics, "test_accuracy")->get<double>(), 0.80) << metrics.dump();
  const Json run = ReadJson(out + "/run.json");
  EXPECT_EQ(FindMember(run, "mode")->get<std::string>(), "allreduce");
  EXPECT_TRUE(std::filesystem::exists(out + "/ckpt-937"));

  // A replica started again after the job's end (an orchestrator that
  // restarts a task killed after it finished): no ring will form, and it
  // has nothing to do, so it exits 0 at once instead of waiting for one.
  const absl::Time again = absl::Now();
  ASSERT_OK(tasks.Start("worker:1", Task(cluster, "worker", 1, args, out + "/again.log")));
  codes = tasks.WaitAll(absl::Seconds(30));
  const std::string again_log = ReadFile(out + "/again.log").value_or("");
  EXPECT_EQ(codes["worker:1"], 0) << again_log;
  EXPECT_LT(absl::Now() - again, absl::Seconds(10));
  EXPECT_THAT(again_log, HasSubstr("): nothing to train"));
}

// AI Platform's layout: a chief and two workers (three replicas), and an
// evaluator that scores the chief's checkpoints as it scores a PS job's.
// With the job's TLS and token, as deploy/docker-compose.allreduce.yml runs
// it: every link of the ring inside TLS. The evaluator starts only once
// the final checkpoint is written, and the chief, as a PS job's does,
// waits for its score of it before it exits (--eval_wait_secs).
TEST(AllReduceClusterTest, AChiefTwoWorkersAndAnEvaluatorEndTogether) {
  const std::string out = TmpDir("chief");
  const Cluster cluster = MakeCluster(1, 2, 1);
  ASSERT_OK_AND_ASSIGN(const std::string certs, ::pstrain::testing::MakeCerts("job"));
  const std::vector<std::string> args = {"--max_steps=300",
                                         "--checkpoint_steps=100",
                                         "--output_dir=" + out,
                                         "--tls_cert=" + certs + "/cert.pem",
                                         "--tls_key=" + certs + "/key.pem",
                                         "--tls_ca=" + certs + "/ca.pem",
                                         "--token_file=" + certs + "/token"};
  const std::map<std::string, std::string> logs = {{"chief", out + "/chief.log"},
                                                    {"worker:0", out + "/w0.log"},
                                                    {"worker:1", out + "/w1.log"},
                                                    {"evaluator", out + "/eval.log"}};
  testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", 0, args, logs.at("chief"))));
  for (int w = 0; w < 2; ++w) {
    const std::string name = absl::StrCat("worker:", w);
    ASSERT_OK(tasks.Start(name, Task(cluster, "worker", w, args, logs.at(name))));
  }
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return std::filesystem::exists(out + "/ckpt-300/MANIFEST"); }, absl::Seconds(90)))
      << ReadFile(logs.at("chief")).value_or("");
  ASSERT_OK(tasks.Start("evaluator", Task(cluster, "evaluator", 0, args, logs.at("evaluator"))));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(120));
  for (const auto& [name, code] : codes) {
    EXPECT_EQ(code, 0) << name << ": " << ReadFile(logs.at(name)).value_or("");
  }
  ASSERT_OK_AND_ASSIGN(std::string chief, ReadFile(out + "/chief.log"));
  EXPECT_THAT(chief, HasSubstr("3 replicas train by ring all-reduce; this is chief:0"));
  EXPECT_THAT(chief, HasSubstr("waiting up to 10m (--eval_wait_secs) for the evaluator to score "
                               "the final checkpoint, step 300"));
  EXPECT_THAT(chief, HasSubstr("the evaluator scored the final checkpoint (step 300) after "));
  EXPECT_THAT(chief, ::testing::MatchesRegex(
                         "(.|\n)*ring formed: to worker:0 by [a-z ]+, from worker:1 by [a-z ]+; "
                         "TLSv1.3 \\(TLS_AES_128_GCM_SHA256\\), records sealed (.|\n)*"));
  ASSERT_OK_AND_ASSIGN(std::string w1, ReadFile(out + "/w1.log"));
  EXPECT_THAT(w1, HasSubstr("this is worker:1 (replica 2)"));
  ASSERT_OK_AND_ASSIGN(std::string eval, ReadFile(out + "/eval.log"));
  EXPECT_THAT(eval, HasSubstr("eval at step 300: loss "));
  EXPECT_EQ(FindMember(ReadJson(out + "/final_metrics.json"), "global_step")->get<double>(), 300);
}

TEST(AllReduceClusterTest, AsyncAndBackupWorkersAreRefusedWithExitTwo) {
  const std::string out = TmpDir("refused");
  const Cluster cluster = MakeCluster(0, 2, 0);
  for (const auto& [flag, why] : std::vector<std::pair<std::string, std::string>>{
           {"--consistency=async", "--consistency=async needs parameter servers"},
           {"--consistency=ssp:2", "--consistency=ssp:2 needs parameter servers"},
           {"--replicas_to_aggregate=1", "(backup workers) needs parameter servers"}}) {
    testing::TaskSet tasks;
    ASSERT_OK(tasks.Start("worker:0", Task(cluster, "worker", 0, {flag, "--output_dir=" + out},
                                           out + "/w0.log")));
    std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
    EXPECT_EQ(codes["worker:0"], 2) << flag;
    EXPECT_THAT(ReadFile(out + "/w0.log").value_or(""), HasSubstr(why));
  }
  // Nothing was written for the refused runs.
  EXPECT_FALSE(std::filesystem::exists(out + "/run.json"));

  // Replicas holding different cluster tokens never form a ring: each
  // refuses the other, and both end with a permanent error.
  ASSERT_OK(WriteFileAtomically(out + "/token0", "first-cluster-token-0123456789abcdef\n"));
  ASSERT_OK(WriteFileAtomically(out + "/token1", "other-cluster-token-0123456789abcdef\n"));
  testing::TaskSet tasks;
  for (int w = 0; w < 2; ++w) {
    ASSERT_OK(tasks.Start(
        absl::StrCat("worker:", w),
        Task(cluster, "worker", w,
             {"--output_dir=" + out, "--ps_wait_s=3", absl::StrCat("--token_file=", out, "/token", w)},
             absl::StrCat(out, "/token_w", w, ".log"))));
  }
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  for (int w = 0; w < 2; ++w) {
    const std::string log = ReadFile(absl::StrCat(out, "/token_w", w, ".log")).value_or("");
    EXPECT_GT(codes[absl::StrCat("worker:", w)], 0) << log;
    EXPECT_LT(codes[absl::StrCat("worker:", w)], 128) << log;
    EXPECT_THAT(log, HasSubstr("presenting a wrong cluster token")) << log;
    EXPECT_THAT(log, ::testing::Not(HasSubstr("cluster-token-0123456789abcdef"))) << log;
  }
  EXPECT_FALSE(std::filesystem::exists(out + "/run.json"));
}

// Training data that cannot be read (a truncated file on the job's shared
// storage): a failure for good at launch, as in the PS mode. Every task
// ends with its code (2) within seconds, the evaluator included, and the
// failure is in run.json; a restart policy by exit code restarts nothing.
TEST(AllReduceClusterTest, UnreadableDataEndsEveryTaskWithExitTwoAndIsRecorded) {
  const std::string out = TmpDir("unreadable");
  const std::string data = TmpDir("unreadable_data");
  ASSERT_OK_AND_ASSIGN(const std::string images, testing::CopyFashionMnistCutShort(data));
  const Cluster cluster = MakeCluster(1, 1, 1);
  const std::vector<std::string> args = {"--max_steps=300", "--data_dir=" + data,
                                         "--output_dir=" + out};
  const std::map<std::string, std::string> logs = ThreeLogs(out);
  const auto [codes, took] = RunThree(cluster, args, logs);
  for (const auto& [name, log] : logs) {
    EXPECT_EQ(codes.at(name), 2) << name << ": " << ReadFile(log).value_or("");
  }
  EXPECT_LT(took, absl::Seconds(20));
  EXPECT_THAT(ReadFile(logs.at("chief")).value_or(""),
              HasSubstr("failed: " + images));
  EXPECT_THAT(ReadFile(logs.at("evaluator")).value_or(""), HasSubstr("(exit 2): "));
  const Json run = ReadJson(out + "/run.json");
  EXPECT_EQ(FindMember(run, "exit_code")->get<int>(), 2) << run.dump();
  EXPECT_THAT(FindMember(run, "outcome")->get<std::string>(), HasSubstr(images));
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));
}

// A replica that fails for good in mid-training (a bad record in the file
// it streams, past the checkpoint at step 10) ends the whole job with its
// code: its failure goes around the ring, so the chief exits 1 with it
// rather than 138 for a lost neighbour, records it in run.json, and the
// evaluator reads it there and exits 1 too, all within seconds.
TEST(AllReduceClusterTest, AFailureForGoodInMidTrainingEndsEveryTaskWithItsCode) {
  const std::string out = TmpDir("bad_record");
  const std::string data = TmpDir("bad_record_data");
  // Record 1201: worker:0's (replica 1's) 601st, in its 31st batch.
  ASSERT_OK_AND_ASSIGN(const std::string config,
                       testing::WriteStreamedCsvWithBadRecord(data, 2000, 1201));
  const Cluster cluster = MakeCluster(1, 1, 1);
  const std::vector<std::string> args = {
      "--model_config=" + config, "--data_dir=" + data,       "--epochs=1",
      "--checkpoint_secs=0",      "--checkpoint_steps=10",    "--output_dir=" + out};
  const std::map<std::string, std::string> logs = ThreeLogs(out);
  const auto [codes, took] = RunThree(cluster, args, logs);
  for (const auto& [name, log] : logs) {
    EXPECT_EQ(codes.at(name), 1) << name << ": " << ReadFile(log).value_or("");
  }
  EXPECT_LT(took, absl::Seconds(30));
  const std::string bad = data + "/train-0.csv line 1203: column \"x0\" is \"oops\"";
  EXPECT_THAT(ReadFile(logs.at("worker:0")).value_or(""), HasSubstr("failed: " + bad));
  EXPECT_THAT(ReadFile(logs.at("worker:0")).value_or(""),
              HasSubstr("every replica was told of this failure"));
  EXPECT_THAT(ReadFile(logs.at("chief")).value_or(""), HasSubstr("failed: worker:0 failed: " + bad));
  EXPECT_THAT(ReadFile(logs.at("evaluator")).value_or(""), HasSubstr("(exit 1): "));
  const Json run = ReadJson(out + "/run.json");
  EXPECT_EQ(FindMember(run, "exit_code")->get<int>(), 1) << run.dump();
  EXPECT_THAT(FindMember(run, "outcome")->get<std::string>(), HasSubstr(bad));
  EXPECT_TRUE(std::filesystem::exists(out + "/ckpt-20/MANIFEST"));
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));
}

// A replica killed mid-job: its neighbour fails the step naming it and
// exits retryable (138) within seconds; started again, the job resumes from
// its last checkpoint and ends at the schedule's step.
TEST(AllReduceClusterTest, AKilledReplicaEndsTheJobRetryablyAndARelaunchResumes) {
  const std::string out = TmpDir("killed");
  const Cluster cluster = MakeCluster(0, 2, 0);
  const std::vector<std::string> args = {"--max_steps=3000", "--checkpoint_steps=100",
                                         "--sync_wait_secs=5", "--output_dir=" + out};
  testing::TaskSet tasks;
  for (int w = 0; w < 2; ++w) {
    ASSERT_OK(tasks.Start(absl::StrCat("worker:", w),
                          Task(cluster, "worker", w, args, absl::StrCat(out, "/w", w, ".log"))));
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return std::filesystem::exists(out + "/ckpt-200"); },
                                 absl::Seconds(60)));
  tasks.Kill("worker:1");
  const absl::Time killed = absl::Now();
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  const absl::Duration to_end = absl::Now() - killed;
  EXPECT_EQ(codes["worker:0"], 138) << ReadFile(out + "/w0.log").value_or("");
  EXPECT_LT(to_end, absl::Seconds(10));
  EXPECT_THAT(ReadFile(out + "/w0.log").value_or(""), HasSubstr("worker:1 (127.0.0.1:"));
  EXPECT_FALSE(std::filesystem::exists(out + "/final_metrics.json"));

  for (int w = 0; w < 2; ++w) {
    ASSERT_OK(tasks.Start(absl::StrCat("worker:", w),
                          Task(cluster, "worker", w, args, absl::StrCat(out, "/again", w, ".log"))));
  }
  codes = tasks.WaitAll(absl::Seconds(120));
  EXPECT_EQ(codes["worker:0"], 0) << ReadFile(out + "/again0.log").value_or("");
  EXPECT_EQ(codes["worker:1"], 0) << ReadFile(out + "/again1.log").value_or("");
  EXPECT_THAT(ReadFile(out + "/again0.log").value_or(""), HasSubstr("resuming from the checkpoint at step"));
  const Json metrics = ReadJson(out + "/final_metrics.json");
  EXPECT_EQ(FindMember(metrics, "global_step")->get<double>(), 3000);
  EXPECT_GT(FindMember(metrics, "resumed_from_step")->get<double>(), 0);
}

}  // namespace
}  // namespace pstrain
