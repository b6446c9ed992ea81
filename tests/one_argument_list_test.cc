// Platforms start every task of a job with one argument list (UAI Train's
// one entrypoint, AI Platform's submitted arguments, a TFJob's shared pod
// template): every role run as a real `pstrain` process with the same flags
// (job flags, each role's own, and the platforms' --work_dir, --log_dir,
// --log_to, --num_gpus) trains a job to the end, while a misspelt flag is
// still refused by every role. With an evaluator in the cluster the chief
// exits only once the final checkpoint's score is on disk, or after
// --eval_wait_secs, saying so. Tasks given other job flags than the chief
// are refused; every flag is documented; a platform's SIGTERM leaves a
// checkpoint of the step reached.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/task_flags.h"
#include "tests/testing/task_set.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/", path);
}

struct Cluster {
  std::string json;  // "cluster": {...}
  std::string TfConfig(const std::string& type, int index = 0) const {
    return absl::StrCat("{", json, R"(, "task": {"type": ")", type, R"(", "index": )", index,
                        "}}");
  }
};

Cluster FourTasks() {
  absl::StatusOr<std::vector<int>> p = PickFreePorts(4);
  EXPECT_OK(p);
  return {absl::StrCat(R"("cluster": {"chief": ["127.0.0.1:)", (*p)[0], R"("], "ps": ["127.0.0.1:)",
                       (*p)[1], R"("], "worker": ["127.0.0.1:)", (*p)[2],
                       R"("], "evaluator": ["127.0.0.1:)", (*p)[3], R"("]})")};
}

// A chief, a PS and a worker (no evaluator).
Cluster ThreeTasks() {
  absl::StatusOr<std::vector<int>> p = PickFreePorts(3);
  EXPECT_OK(p);
  return {absl::StrCat(R"("cluster": {"chief": ["127.0.0.1:)", (*p)[0], R"("], "ps": ["127.0.0.1:)",
                       (*p)[1], R"("], "worker": ["127.0.0.1:)", (*p)[2], R"("]})")};
}

SpawnOptions Task(const Cluster& cluster, const std::string& type,
                  const std::vector<std::string>& flags, const std::string& log) {
  SpawnOptions o;
  o.argv = {Runfile("pstrain")};
  o.argv.insert(o.argv.end(), flags.begin(), flags.end());
  o.env = {{"TF_CONFIG", cluster.TfConfig(type)}};
  o.log_path = log;
  return o;
}

// The log at `path` once it says `text`, or as it is after `timeout`.
std::string WaitForLog(const std::string& path, const std::string& text,
                       absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  std::string log = ReadFile(path).value_or("");
  while (!absl::StrContains(log, text) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(100));
    log = ReadFile(path).value_or("");
  }
  return log;
}

int64_t ScoredStep(const std::string& output_dir) {
  int64_t step = -1;
  auto text = ReadFile(output_dir + "/eval/scored");
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &step)) return -1;
  return step;
}

TEST(OneArgumentListTest, EveryRoleTrainsAJobWithTheSameFlags) {
  const std::string dir = pstrain::testing::TempDir() + "/same";
  const std::string out = dir + "/out", logs = dir + "/logs";
  ASSERT_OK(MakeDirs(dir));
  const Cluster cluster = FourTasks();
  // The config is named relative to --work_dir, as UAI Train's code
  // directory; an evaluator that polls every 3 s would score the final
  // checkpoint after a chief that did not wait had exited.
  const std::vector<std::string> flags = {"--model_config=fashion_mnist_mlp.pbtxt",
                                          "--work_dir=" + Runfile("configs"),
                                          "--epochs=1",
                                          "--max_steps=150",
                                          "--batch_size=32",
                                          "--learning_rate=0.05",
                                          "--optimizer=sgd",
                                          "--seed=3",
                                          "--consistency=async",
                                          "--checkpoint_secs=600",
                                          "--keep_checkpoints=3",
                                          "--data_dir=/usr/share/datasets/fashion-mnist",
                                          "--output_dir=" + out,
                                          "--log_dir=" + logs,
                                          "--log_to=stdout",
                                          "--num_gpus=1",
                                          "--eval_poll_secs=3",
                                          "--eval_wait_secs=120",
                                          "--ps_wait_s=60",
                                          "--max_message_mib=64",
                                          "--blas_threads=1"};
  pstrain::testing::TaskSet tasks;
  for (const char* type : {"ps", "chief", "worker", "evaluator"}) {
    ASSERT_OK(tasks.Start(type, Task(cluster, type, flags, absl::StrCat(dir, "/", type, ".out"))));
  }
  // The chief first: when it has exited, the final score is on disk.
  int64_t scored_when_the_chief_ended = -1;
  ASSERT_TRUE(pstrain::testing::WaitUntil(
      [&] {
        if (ReadFile(dir + "/chief.out").value_or("").find("metrics written to") ==
            std::string::npos) {
          return false;
        }
        scored_when_the_chief_ended = ScoredStep(out);
        return true;
      },
      absl::Seconds(120)))
      << ReadFile(dir + "/chief.out").value_or("");
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(60));
  for (const char* type : {"ps", "chief", "worker", "evaluator"}) {
    EXPECT_EQ(codes[type], 0) << type << ":\n" << ReadFile(dir + "/" + type + ".out").value_or("");
  }
  ASSERT_OK_AND_ASSIGN(std::string metrics_text, ReadFile(out + "/final_metrics.json"));
  ASSERT_OK_AND_ASSIGN(Json metrics, ParseJson(metrics_text));
  const int64_t step = FindMember(metrics, "global_step")->get<int64_t>();
  EXPECT_EQ(step, 300);  // two replicas, 150 steps each
  EXPECT_EQ(scored_when_the_chief_ended, step);
  EXPECT_GT(FindMember(metrics, "test_accuracy")->get<double>(), 0.6);

  // Each task's log also in --log_dir, saying what it ignored and why.
  ASSERT_OK_AND_ASSIGN(std::string ps, ReadFile(logs + "/ps-0.log"));
  EXPECT_THAT(ps, HasSubstr("ps:0: ignoring --batch_size, --blas_threads, --checkpoint_secs, "));
  EXPECT_THAT(ps, HasSubstr("--num_gpus, "));
  EXPECT_THAT(ps, HasSubstr("(flags the ps does not use, accepted so that every task can share "
                            "one argument list)"));
  EXPECT_THAT(ps, HasSubstr("stopping: job finished"));
  ASSERT_OK_AND_ASSIGN(std::string chief, ReadFile(logs + "/chief-0.log"));
  EXPECT_THAT(
      chief,
      HasSubstr("ignoring --eval_poll_secs, --max_message_mib (flags the chief does not use"));
  EXPECT_THAT(chief, HasSubstr("--num_gpus=1: "));
  EXPECT_THAT(chief, HasSubstr(absl::StrCat("for the evaluator to score the final checkpoint, "
                                            "step ",
                                            step)));
  EXPECT_THAT(chief, HasSubstr(absl::StrCat("the evaluator scored the final checkpoint (step ",
                                            step, ")")));
  ASSERT_OK_AND_ASSIGN(std::string worker, ReadFile(logs + "/worker-0.log"));
  EXPECT_THAT(worker, HasSubstr("worker:0: done: 150 steps"));
  ASSERT_OK_AND_ASSIGN(std::string evaluator, ReadFile(logs + "/evaluator-0.log"));
  EXPECT_THAT(evaluator, HasSubstr(absl::StrCat("eval at step ", step, ": loss")));
  // The same lines on the process's output.
  EXPECT_THAT(ReadFile(dir + "/worker.out").value_or(""), HasSubstr("worker:0: done: 150 steps"));
}

TEST(OneArgumentListTest, AMisspeltFlagIsRefusedByEveryRole) {
  const Cluster cluster = FourTasks();
  // A PS that cannot serve tells the job's chief before it exits (trying
  // for up to 20 s while none answers): a chief with the right flags hears
  // it and fails the job with the PS's code.
  const std::string dir = pstrain::testing::TempDir() + "/typo";
  ASSERT_OK(MakeDirs(dir));
  pstrain::testing::TaskSet job;
  ASSERT_OK(job.Start("chief", Task(cluster, "chief",
                                    {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                     "--output_dir=" + dir + "/out"},
                                    dir + "/chief.log")));
  ASSERT_THAT(WaitForLog(dir + "/chief.log", "waiting for 1 ps", absl::Seconds(30)),
              HasSubstr("waiting for 1 ps"));
  for (const char* type : {"ps", "chief", "worker", "evaluator"}) {
    const std::string log = absl::StrCat(pstrain::testing::TempDir(), "/typo-", type, ".log");
    ASSERT_OK_AND_ASSIGN(
        pid_t pid, Spawn(Task(cluster, type, {"--epoch=2", "--num_gpus=0", "--work_dir=/"}, log)));
    std::optional<ChildExit> exit = WaitChild(pid, absl::Seconds(30));
    ASSERT_TRUE(exit.has_value()) << type;
    EXPECT_EQ(exit->code, 2) << type;
    EXPECT_THAT(ReadFile(log).value_or(""),
                HasSubstr("unknown flag --epoch (did you mean --epochs?)"))
        << type;
  }
  EXPECT_THAT(ReadFile(pstrain::testing::TempDir() + "/typo-ps.log").value_or(""),
              HasSubstr("telling the job's chief (127.0.0.1:"));
  std::map<std::string, int> codes = job.WaitAll(absl::Seconds(30));
  const std::string chief = ReadFile(dir + "/chief.log").value_or("");
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_THAT(chief, HasSubstr("ps:0 failed for good (exit 2): unknown flag --epoch"));
}

TEST(OneArgumentListTest, PlatformFlagsWithBadValuesAreNamed) {
  const Cluster cluster = FourTasks();
  for (const auto& [flags, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--log_to=file"}, "--log_to=file needs --log_dir"},
           {{"--log_to=syslog"}, "--log_to=syslog: must be stderr, stdout or file"},
           {{"--work_dir=/no/such/dir"}, "--work_dir: cannot change into /no/such/dir"},
           {{"--num_gpus=-1"}, "--num_gpus=-1: must be in 0..1024"},
           {{"--num_gpus=0", "--device=cuda"}, "--num_gpus=0 and --device=cuda disagree"}}) {
    const std::string log = pstrain::testing::TempDir() + "/bad-platform.log";
    ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(Task(cluster, "worker", flags, log)));
    std::optional<ChildExit> exit = WaitChild(pid, absl::Seconds(30));
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(exit->code, 2) << message;
    EXPECT_THAT(ReadFile(log).value_or(""), HasSubstr(message));
  }
}

TEST(OneArgumentListTest, TheChiefWaitsForAnEvaluatorThatNeverScoresOnlyWithinItsBound) {
  const std::string dir = pstrain::testing::TempDir() + "/no-evaluator";
  const Cluster cluster = FourTasks();  // the evaluator is listed but never started
  const std::vector<std::string> flags = {"--max_steps=20", "--hidden=16",
                                          "--output_dir=" + dir + "/out", "--eval_wait_secs=2"};
  pstrain::testing::TaskSet tasks;
  for (const char* type : {"ps", "chief", "worker"}) {
    ASSERT_OK(tasks.Start(type, Task(cluster, type, flags, absl::StrCat(dir, "-", type, ".log"))));
  }
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(90));
  const std::string chief = ReadFile(dir + "-chief.log").value_or("");
  EXPECT_EQ(codes["chief"], 0) << chief;
  EXPECT_EQ(codes["worker"], 0);
  EXPECT_EQ(codes["ps"], 0);
  EXPECT_THAT(chief, HasSubstr("waiting up to 2s (--eval_wait_secs) for the evaluator to score "
                               "the final checkpoint, step 40"));
  EXPECT_THAT(chief, HasSubstr("the evaluator has not scored step 40 after 2s (--eval_wait_secs); "
                               "ending without its score"));
  EXPECT_THAT(chief, Not(HasSubstr("the evaluator scored")));
}

// Kubernetes stops a job's pods with SIGTERM, all at once, and a grace
// period: the chief writes a checkpoint of the step reached, the PS serve
// until it is written, and each exits 128 + 15; nothing else checkpoints
// here (--checkpoint_secs=3600 after ckpt-0).
TEST(OneArgumentListTest, SigtermLeavesACheckpointOfTheStepReached) {
  const std::string dir = pstrain::testing::TempDir() + "/sigterm";
  const Cluster cluster = ThreeTasks();
  const std::string out = dir + "/out";
  const std::vector<std::string> flags = {
      "--epochs=50",       "--hidden=16",   "--checkpoint_secs=3600",
      "--straggler=all:1", "--ps_wait_s=2", "--output_dir=" + out};
  pstrain::testing::TaskSet tasks;
  for (const char* type : {"ps", "chief", "worker"}) {
    ASSERT_OK(tasks.Start(type, Task(cluster, type, flags, absl::StrCat(dir, "-", type, ".log"))));
  }
  ASSERT_TRUE(pstrain::testing::WaitUntil(
      [&] {
        return ReadFile(dir + "-chief.log").value_or("").find("step 800/") != std::string::npos;
      },
      absl::Seconds(120)))
      << ReadFile(dir + "-chief.log").value_or("");
  tasks.Signal("chief", SIGTERM);
  tasks.Signal("ps", SIGTERM);
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(60));
  const std::string chief = ReadFile(dir + "-chief.log").value_or("");
  const std::string ps = ReadFile(dir + "-ps.log").value_or("");
  EXPECT_EQ(codes["chief"], 143) << chief;
  EXPECT_EQ(codes["ps"], 143) << ps;
  EXPECT_THAT(chief, HasSubstr("signal 15: writing a checkpoint of the step reached before "
                               "stopping"));
  EXPECT_THAT(chief, HasSubstr("checkpoint written; exiting with 143"));
  EXPECT_THAT(ps, HasSubstr("the chief's checkpoint is written"));
  // The index names the checkpoint of the signal: past the chief's own 800
  // steps (two replicas push), complete on disk.
  const std::vector<int64_t> steps = ListCheckpointSteps(out);
  ASSERT_FALSE(steps.empty());
  EXPECT_GE(steps.back(), 800);
  ASSERT_OK_AND_ASSIGN(const std::string index, ReadFile(out + "/checkpoint"));
  EXPECT_EQ(index, absl::StrCat("{\"step\":", steps.back(), "}\n"));
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(out, "/ckpt-", steps.back(), "/MANIFEST")));
}

// An evaluator given another model than the run it scores says so, by
// its run.json, and exits 2 rather than passing every checkpoint over as
// damaged; it tells the chief, and the job, whose scores would never
// come, fails with 2 on every task at once.
TEST(OneArgumentListTest, AnEvaluatorWithAnotherModelIsRefused) {
  const std::string dir = pstrain::testing::TempDir() + "/other-evaluator";
  const Cluster cluster = FourTasks();
  // Steps slow enough (10 ms each, 2 s) for the evaluator, started as the
  // chief trains, to find the run and report before the training ends.
  const std::vector<std::string> flags = {"--max_steps=200", "--hidden=16", "--straggler=all:10",
                                          "--eval_wait_secs=2", "--output_dir=" + dir + "/out"};
  std::vector<std::string> other = flags;
  other[1] = "--hidden=32";
  pstrain::testing::TaskSet tasks;
  for (const char* type : {"ps", "chief", "worker"}) {
    ASSERT_OK(tasks.Start(type, Task(cluster, type, flags, absl::StrCat(dir, "-", type, ".log"))));
  }
  ASSERT_THAT(WaitForLog(dir + "-chief.log", "training replica 0", absl::Seconds(30)),
              HasSubstr("training replica 0"));
  ASSERT_OK(tasks.Start("evaluator", Task(cluster, "evaluator", other, dir + "-evaluator.log")));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(90));
  const std::string evaluator = ReadFile(dir + "-evaluator.log").value_or("");
  const std::string chief = ReadFile(dir + "-chief.log").value_or("");
  EXPECT_EQ(codes["evaluator"], 2) << evaluator;
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_EQ(codes["ps"], 2);
  EXPECT_EQ(codes["worker"], 2);
  EXPECT_THAT(chief, HasSubstr("evaluator:0 failed for good (exit 2): the evaluator was started "
                               "with another model"));
  EXPECT_THAT(evaluator, HasSubstr("the evaluator was started with another model than the run it "
                                   "scores (" +
                                   dir +
                                   "/out/run.json): dense_0/kernel: shape "
                                   "[784, 16] in the run, shape [784, 32] here;"));
}

// Every flag a task accepts is in `pstrain help` and in the flag reference.
TEST(OneArgumentListTest, EveryFlagATaskAcceptsIsInHelpAndTheReference) {
  const std::string log = pstrain::testing::TempDir() + "/help.txt";
  SpawnOptions o;
  o.argv = {Runfile("pstrain"), "help"};
  o.log_path = log;
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_OK(pid);
  std::optional<ChildExit> exit = WaitChild(*pid, absl::Seconds(30));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 0);
  ASSERT_OK_AND_ASSIGN(const std::string help, ReadFile(log));
  ASSERT_OK_AND_ASSIGN(const std::string reference, ReadFile(Runfile("docs/flags.md")));
  auto names = [](const std::string& text, const std::string& flag) {
    return text.find("--" + flag) != std::string::npos ||
           text.find("--[no]" + flag) != std::string::npos;
  };
  ASSERT_GT(TaskFlagNames().size(), 50u);
  for (const std::string& flag : TaskFlagNames()) {
    EXPECT_TRUE(names(help, flag)) << "pstrain help does not name --" << flag;
    EXPECT_TRUE(names(reference, flag)) << "docs/flags.md does not name --" << flag;
  }
}

// The converse: a task given other job flags than the chief (another
// model, batch size and learning rate) is refused as it joins, each
// difference named, and the job ends at once (exit 2 everywhere) rather
// than failing later on a size mismatch or waiting for the worker.
TEST(OneArgumentListTest, ATaskWithOtherJobFlagsThanTheChiefIsRefusedAndTheJobEnds) {
  const std::string dir = pstrain::testing::TempDir() + "/other-flags";
  const Cluster cluster = ThreeTasks();
  const std::vector<std::string> flags = {"--epochs=50", "--hidden=16",
                                          "--output_dir=" + dir + "/out"};
  std::vector<std::string> other = flags;
  other.insert(other.end(),
               {"--hidden=64", "--batch_size=128", "--learning_rate=0.5", "--noshared_memory"});
  other.erase(other.begin() + 1);  // the first --hidden
  pstrain::testing::TaskSet tasks;
  const absl::Time start = absl::Now();
  ASSERT_OK(tasks.Start("ps", Task(cluster, "ps", flags, dir + "-ps.log")));
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", flags, dir + "-chief.log")));
  ASSERT_OK(tasks.Start("worker", Task(cluster, "worker", other, dir + "-worker.log")));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(90));
  // Not after the chief's own 50 epochs: the refusal stops its training too.
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  const std::string worker = ReadFile(dir + "-worker.log").value_or("");
  const std::string chief = ReadFile(dir + "-chief.log").value_or("");
  EXPECT_EQ(codes["worker"], 2) << worker;
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_EQ(codes["ps"], 2);
  EXPECT_THAT(worker, HasSubstr("--batch_size=128 here, 32 on the chief; --learning_rate=0.5 "
                                "here, 0.05 on the chief; the model (--hidden, --model_config, "
                                "--optimizer): dense_0/kernel: shape [784, 16] on the chief, "
                                "shape [784, 64] here;"));
  EXPECT_THAT(worker, HasSubstr("Give every task of the job the same job flags"));
  EXPECT_THAT(worker, Not(HasSubstr("shared_memory")));  // each task's own
  EXPECT_THAT(chief, HasSubstr("worker:0 was started with other job flags than the chief: "));
}


// A job that fails for good ends every task with its code within seconds:
// here the chief cannot read the data (the worker would not know before it
// trains), records that in run.json, and the PS and the worker waiting for
// it find it there and exit 2 too, instead of waiting for a chief that has
// gone (--ps_wait_s is 60).
TEST(OneArgumentListTest, AJobThatFailsForGoodEndsEveryTaskWithItsCode) {
  const std::string dir = pstrain::testing::TempDir() + "/fails-for-good";
  std::filesystem::remove_all(dir);
  const Cluster cluster = ThreeTasks();
  const std::vector<std::string> flags = {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                          "--data_dir=" + dir + "/nowhere",
                                          "--output_dir=" + dir + "/out"};
  pstrain::testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("ps", Task(cluster, "ps", flags, dir + "-ps.log")));
  ASSERT_OK(tasks.Start("worker", Task(cluster, "worker", flags, dir + "-worker.log")));
  absl::SleepFor(absl::Seconds(1));  // both wait for the chief
  const absl::Time start = absl::Now();
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", flags, dir + "-chief.log")));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(12));
  const std::string ps = ReadFile(dir + "-ps.log").value_or("");
  const std::string worker = ReadFile(dir + "-worker.log").value_or("");
  EXPECT_EQ(codes["chief"], 2) << ReadFile(dir + "-chief.log").value_or("");
  EXPECT_EQ(codes["ps"], 2) << ps;
  EXPECT_EQ(codes["worker"], 2) << worker;
  EXPECT_THAT(ps, HasSubstr("stopping: the job failed at "));
  EXPECT_THAT(worker, HasSubstr("failed: the job failed at "));
  EXPECT_THAT(worker, HasSubstr("no such directory " + dir + "/nowhere"));
}

// An output directory that cannot hold run.json (here a path under a
// regular file; the chaos trials mount one read-only): the chief cannot
// record the failure, so it tells the PS to stop with the job's code and
// answers every task that asks (the worker's Join; an evaluator between
// polls, or as it reports its own failure) until each has: every task
// exits 2 within seconds.
TEST(OneArgumentListTest, AnOutputDirectoryThatCannotBeWrittenEndsEveryTask) {
  const std::string dir = pstrain::testing::TempDir() + "/unwritable";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  ASSERT_OK(WriteFileAtomically(dir + "/a-file", "not a directory\n"));
  const Cluster cluster = FourTasks();
  const std::vector<std::string> flags = {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                          "--eval_poll_secs=1",
                                          "--output_dir=" + dir + "/a-file/out"};
  pstrain::testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("ps", Task(cluster, "ps", flags, dir + "/ps.log")));
  ASSERT_OK(tasks.Start("worker", Task(cluster, "worker", flags, dir + "/worker.log")));
  ASSERT_OK(tasks.Start("evaluator", Task(cluster, "evaluator", flags, dir + "/evaluator.log")));
  absl::SleepFor(absl::Seconds(1));  // they wait for the chief
  const absl::Time start = absl::Now();
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", flags, dir + "/chief.log")));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const std::string chief = ReadFile(dir + "/chief.log").value_or("");
  const std::string ps = ReadFile(dir + "/ps.log").value_or("");
  const std::string worker = ReadFile(dir + "/worker.log").value_or("");
  const std::string evaluator = ReadFile(dir + "/evaluator.log").value_or("");
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_EQ(codes["ps"], 2) << ps;
  EXPECT_EQ(codes["worker"], 2) << worker;
  EXPECT_EQ(codes["evaluator"], 2) << evaluator;
  EXPECT_THAT(chief, HasSubstr("does not say so: telling its tasks"));
  EXPECT_THAT(chief, HasSubstr("every worker and evaluator has been told"));
  EXPECT_THAT(ps, HasSubstr("stopping: job failed"));
  EXPECT_THAT(worker, HasSubstr("the job failed for good (exit 2): "));
  EXPECT_THAT(worker, HasSubstr("Not a directory"));
  // The evaluator cannot write its summaries there either: it fails for
  // good itself and tells the chief so, which counts it as told.
  EXPECT_THAT(evaluator, HasSubstr("failed: cannot create directory"));
}

// A worker started under an index its cluster does not have (5 of 1): it
// exits 2, and tells the chief, which would otherwise wait for worker:0
// for ever: the job fails and every task exits 2, an evaluator the
// cluster does not list (AI Platform's layout) too.
TEST(OneArgumentListTest, ATaskOutsideItsClusterFailsTheJob) {
  const std::string dir = pstrain::testing::TempDir() + "/outside";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  const Cluster cluster = ThreeTasks();
  const std::vector<std::string> flags = {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                          "--output_dir=" + dir + "/out"};
  pstrain::testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("ps", Task(cluster, "ps", flags, dir + "/ps.log")));
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", flags, dir + "/chief.log")));
  ASSERT_OK(tasks.Start("evaluator", Task(cluster, "evaluator", flags, dir + "/evaluator.log")));
  ASSERT_THAT(WaitForLog(dir + "/chief.log", "training replica 0", absl::Seconds(30)),
              HasSubstr("training replica 0"));
  const absl::Time start = absl::Now();
  SpawnOptions outside = Task(cluster, "worker", flags, dir + "/worker.log");
  outside.env = {{"TF_CONFIG", cluster.TfConfig("worker", 5)}};
  ASSERT_OK(tasks.Start("worker", outside));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const std::string chief = ReadFile(dir + "/chief.log").value_or("");
  const std::string worker = ReadFile(dir + "/worker.log").value_or("");
  EXPECT_EQ(codes["worker"], 2) << worker;
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_EQ(codes["ps"], 2) << ReadFile(dir + "/ps.log").value_or("");
  const std::string evaluator = ReadFile(dir + "/evaluator.log").value_or("");
  EXPECT_EQ(codes["evaluator"], 2) << evaluator;
  EXPECT_THAT(evaluator, HasSubstr("failed: the job failed "));
  EXPECT_THAT(worker, HasSubstr("task.index 5 out of range: cluster.worker has 1 entry"));
  EXPECT_THAT(worker, HasSubstr("telling the job's chief"));
  EXPECT_THAT(chief, HasSubstr("worker:5 failed for good (exit 2): TF_CONFIG task.index 5"));
  ASSERT_OK_AND_ASSIGN(const std::string run, ReadFile(dir + "/out/run.json"));
  EXPECT_THAT(run, HasSubstr("\"exit_code\": 2"));
}

// AI Platform's layout, an evaluator the cluster does not list: the chief
// does not know of it and scores the final checkpoint itself, as the
// evaluator does; the eval summaries hold each step once (TensorBoard drew
// the final step twice).
TEST(OneArgumentListTest, AnUnlistedEvaluatorAndTheChiefWriteEachEvalStepOnce) {
  const std::string dir = pstrain::testing::TempDir() + "/unlisted-evaluator";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  const Cluster cluster = ThreeTasks();
  const std::vector<std::string> flags = {
      "--epochs=1",          "--hidden=16",        "--max_steps=60",
      "--checkpoint_secs=0", "--checkpoint_steps=20", "--eval_poll_secs=1",
      "--ps_wait_s=60",      "--output_dir=" + dir + "/out"};
  pstrain::testing::TaskSet tasks;
  for (const char* type : {"ps", "chief", "worker", "evaluator"}) {
    ASSERT_OK(tasks.Start(type, Task(cluster, type, flags, absl::StrCat(dir, "/", type, ".log"))));
  }
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(90));
  for (const char* type : {"ps", "chief", "worker", "evaluator"}) {
    EXPECT_EQ(codes[type], 0) << type << ": "
                              << ReadFile(absl::StrCat(dir, "/", type, ".log")).value_or("");
  }
  const std::string evaluator = ReadFile(dir + "/evaluator.log").value_or("");
  EXPECT_THAT(evaluator, HasSubstr("eval at step 120: loss"));
  ASSERT_OK_AND_ASSIGN(const std::string lines, ReadFile(dir + "/out/eval/scalars.jsonl"));
  std::map<int64_t, int> per_step;
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipEmpty())) {
    const size_t at = line.find("\"step\": ");
    ASSERT_NE(at, absl::string_view::npos) << line;
    int64_t step = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line.substr(at + 8, line.find(',', at) - at - 8), &step)) << line;
    ++per_step[step];
  }
  EXPECT_EQ(per_step[120], 1) << lines;
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 1) << "step " << step << "\n" << lines;
}

// A PS that cannot serve for good (here a flag of its own that does not
// parse, as a typo in its pod spec) tells the chief, which fails the job
// with its code while it waits for the PS, instead of waiting
// --ps_wait_s (60) for it.
TEST(OneArgumentListTest, APsThatCannotServeFailsTheJob) {
  const std::string dir = pstrain::testing::TempDir() + "/ps-cannot-serve";
  std::filesystem::remove_all(dir);
  ASSERT_OK(MakeDirs(dir));
  const Cluster cluster = ThreeTasks();
  std::vector<std::string> flags = {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                    "--output_dir=" + dir + "/out"};
  pstrain::testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("chief", Task(cluster, "chief", flags, dir + "/chief.log")));
  ASSERT_OK(tasks.Start("worker", Task(cluster, "worker", flags, dir + "/worker.log")));
  ASSERT_THAT(WaitForLog(dir + "/chief.log", "waiting for 1 ps", absl::Seconds(30)),
              HasSubstr("waiting for 1 ps"));
  const absl::Time start = absl::Now();
  flags.push_back("--max_table_rows=lots");
  ASSERT_OK(tasks.Start("ps", Task(cluster, "ps", flags, dir + "/ps.log")));
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(40));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const std::string chief = ReadFile(dir + "/chief.log").value_or("");
  const std::string ps = ReadFile(dir + "/ps.log").value_or("");
  EXPECT_EQ(codes["ps"], 2) << ps;
  EXPECT_EQ(codes["chief"], 2) << chief;
  EXPECT_EQ(codes["worker"], 2) << ReadFile(dir + "/worker.log").value_or("");
  EXPECT_THAT(ps, HasSubstr("--max_table_rows"));
  EXPECT_THAT(chief, HasSubstr("ps:0 failed for good (exit 2): "));
}

// One job per output directory: a second chief there is refused with exit
// 2, naming the first (its pid), before it reads or writes anything; once
// the first is gone (killed: no clean exit), a relaunch takes the
// directory over.
TEST(OneArgumentListTest, ASecondChiefOnOneOutputDirIsRefusedAndARelaunchIsNot) {
  const std::string dir = pstrain::testing::TempDir() + "/two-chiefs";
  std::filesystem::remove_all(dir);
  const Cluster cluster = ThreeTasks();  // no PS runs: each chief waits for it
  const std::vector<std::string> flags = {"--epochs=1", "--hidden=16", "--ps_wait_s=60",
                                          "--output_dir=" + dir + "/out"};
  pstrain::testing::TaskSet tasks;
  ASSERT_OK(tasks.Start("first", Task(cluster, "chief", flags, dir + "-first.log")));
  ASSERT_THAT(WaitForLog(dir + "-first.log", "waiting for 1 ps", absl::Seconds(30)),
              HasSubstr("waiting for 1 ps"));
  ASSERT_OK_AND_ASSIGN(const std::string run_json, ReadFile(dir + "/out/run.json"));
  const Cluster other = ThreeTasks();
  ASSERT_OK(tasks.Start("second", Task(other, "chief", flags, dir + "-second.log")));
  const std::string second = WaitForLog(dir + "-second.log", "job failed", absl::Seconds(40));
  EXPECT_THAT(second, HasSubstr(absl::StrCat(dir, "/out is in use (", dir,
                                             "/out/LOCK held by: pid ")));
  EXPECT_THAT(second, HasSubstr(", chief:0): another job runs in this output directory; one "
                                "job per --output_dir"));
  EXPECT_EQ(ReadFile(dir + "/out/run.json").value_or(""), run_json);  // untouched
  tasks.Kill("first");
  ASSERT_OK(tasks.Start("relaunch", Task(cluster, "chief", flags, dir + "-relaunch.log")));
  EXPECT_THAT(WaitForLog(dir + "-relaunch.log", "waiting for 1 ps", absl::Seconds(30)),
              HasSubstr("waiting for 1 ps"));
  tasks.Kill("relaunch");
  std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(30));
  EXPECT_EQ(codes["second"], 2) << second;
}

}  // namespace
}  // namespace pstrain
