// Crash tests: real pstrain processes started from hand-written TF_CONFIGs
// (as an orchestrator starts them), killed with SIGKILL by PID and, for a
// PS, started again at the same address, as Kubernetes or a supervisor
// would. Every wait is bounded.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/task_set.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Pstrain() { return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/pstrain"); }
// pstrain whose checkpoint shards each take PSTRAIN_TEST_SHARD_PAUSE_MS
// longer to write (tests/slow_disk_main.cc).
std::string SlowDiskPstrain() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/tests/pstrain_slow_disk");
}

// A cluster of 2 PS, a chief and 2 workers on loopback, each task its own
// process with its own log.
class Cluster {
 public:
  explicit Cluster(const std::string& name) : out_(testing::TempDir() + "/" + name) {
    EXPECT_OK(MakeDirs(out_));
    auto ports = PickFreePorts(5);
    EXPECT_OK(ports);
    auto at = [&](int i) { return absl::StrCat("\"127.0.0.1:", (*ports)[i], "\""); };
    cluster_ = absl::StrCat(R"({"cluster": {"chief": [)", at(0), R"(], "ps": [)", at(1), ", ",
                            at(2), R"(], "worker": [)", at(3), ", ", at(4), "]}");
    ps_address_ = {absl::StrCat("127.0.0.1:", (*ports)[1]),
                   absl::StrCat("127.0.0.1:", (*ports)[2])};
  }
  const std::string& out() const { return out_; }
  const std::string& ps_address(int i) const { return ps_address_[i]; }

  // Starts task `type`:`index` (a PS with `ps_flags`, the others with the
  // job flags and --output_dir). Its log is out/<type>-<index>.log, appended
  // to when it is started again. With `shard_pause`, on a disk where each
  // checkpoint shard it writes takes that much longer.
  void Start(const std::string& type, int index, const std::vector<std::string>& flags,
             absl::Duration shard_pause = absl::ZeroDuration()) {
    SpawnOptions o;
    o.argv = {shard_pause > absl::ZeroDuration() ? SlowDiskPstrain() : Pstrain()};
    o.argv.insert(o.argv.end(), flags.begin(), flags.end());
    if (type != "ps") o.argv.push_back("--output_dir=" + out_);
    o.env = {{"TF_CONFIG", absl::StrCat(cluster_, R"(, "task": {"type": ")", type,
                                        R"(", "index": )", index, "}}")}};
    if (shard_pause > absl::ZeroDuration()) {
      o.env.push_back({"PSTRAIN_TEST_SHARD_PAUSE_MS",
                       absl::StrCat(absl::ToInt64Milliseconds(shard_pause))});
    }
    const std::string name = absl::StrCat(type, "-", index);
    o.log_path = absl::StrCat(out_, "/", name, starts_[name]++ == 0 ? "" : "-again", ".log");
    ASSERT_OK(tasks_.Start(name, o));
  }

  // With `ps1_shard_pause`, ps:1 on a slow disk (Start).
  void StartAll(const std::vector<std::string>& job,
                absl::Duration ps1_shard_pause = absl::ZeroDuration()) {
    Start("ps", 0, {});
    Start("ps", 1, {}, ps1_shard_pause);
    Start("chief", 0, job);
    Start("worker", 0, job);
    Start("worker", 1, job);
  }

  void Kill(const std::string& name) { tasks_.Kill(name); }
  std::map<std::string, int> WaitAll(absl::Duration timeout) { return tasks_.WaitAll(timeout); }

  std::string Log(const std::string& name) const {
    return ReadFile(absl::StrCat(out_, "/", name, ".log")).value_or("");
  }

  // Waits until every replica trains and a periodic checkpoint is written
  // (step 0 is written at the start). False after 60 s.
  bool WaitUntilTrainingAndCheckpointed() const {
    return testing::WaitUntil(
        [&] {
          for (const char* task : {"chief-0", "worker-0", "worker-1"}) {
            if (Log(task).find("training replica ") == std::string::npos) return false;
          }
          return IndexStep() > 0;
        },
        absl::Seconds(60));
  }

  // SIGKILL to ps:`i`, then waits (30 s at most) for the chief's heartbeat
  // to log it gone.
  bool KillPsAndWaitForTheChief(int i) {
    Kill(absl::StrCat("ps-", i));
    const std::string gone = absl::StrCat("ps:", i, " (", ps_address(i), ") stopped answering (");
    return testing::WaitUntil([&] { return Log("chief-0").find(gone) != std::string::npos; },
                              absl::Seconds(30));
  }

  // The step the checkpoint index names, or -1.
  int64_t IndexStep() const {
    auto index = ReadCheckpointIndex(out_);
    return index.ok() ? index->step : -1;
  }

  Json Metrics() const {
    auto text = ReadFile(out_ + "/final_metrics.json");
    EXPECT_OK(text);
    auto json = ParseJson(text.value_or("{}"));
    EXPECT_OK(json);
    return json.ok() ? *json : Json::object();
  }

 private:
  std::string out_;
  std::string cluster_;
  std::vector<std::string> ps_address_;
  std::map<std::string, int> starts_;
  testing::TaskSet tasks_;
};

// The number after `prefix` in the first line of `log` holding it, or -1.
double NumberAfter(const std::string& log, const std::string& prefix) {
  const size_t at = log.find(prefix);
  if (at == std::string::npos) return -1;
  const size_t begin = at + prefix.size();
  size_t end = begin;
  while (end < log.size() && (std::isdigit(log[end]) || log[end] == '.')) ++end;
  double v = -1;
  return absl::SimpleAtod(log.substr(begin, end - begin), &v) ? v : -1;
}

// kill -9 one PS mid-training and start it again at the same address: the
// chief restores every PS from the newest checkpoint, the replicas carry on
// from its step, and the job finishes with the async accuracy bar (0.83).
TEST(RecoveryTest, PsKilledAndRestartedAtTheSameAddressAndTheJobResumes) {
  Cluster c("ps_restart");
  // The guide model (784-256-256-10, Adam), whose async bar is 0.83, for 3
  // epochs: the replicas overlap in time (each step waits 3 ms, so that
  // each is still training when the PS dies; they start at different
  // moments and would finish in 1-2 s otherwise), and overlapping async
  // replicas need more steps than ones taking turns.
  c.StartAll({"--model_config=configs/fashion_mnist_mlp.pbtxt", "--epochs=3", "--checkpoint_secs=1",
              "--straggler=all:3"});
  // Once every replica trains, after the first periodic checkpoint.
  ASSERT_TRUE(c.WaitUntilTrainingAndCheckpointed()) << c.Log("chief-0");
  const int64_t newest = c.IndexStep();
  // The chief's heartbeat notices the PS is gone before it comes back.
  ASSERT_TRUE(c.KillPsAndWaitForTheChief(1)) << c.Log("chief-0");
  c.Start("ps", 1, {});
  std::map<std::string, int> codes = c.WaitAll(absl::Seconds(180));
  for (const auto& [name, code] : codes) EXPECT_EQ(code, 0) << name << "\n" << c.Log(name);

  const std::string chief = c.Log("chief-0");
  EXPECT_THAT(chief, HasSubstr(absl::StrCat("ps:1 (", c.ps_address(1),
                                            ") restarted without variables (away ")));
  const int64_t restored =
      static_cast<int64_t>(NumberAfter(chief, "restored every ps to the checkpoint at step "));
  // The newest checkpoint when the PS died, or one written in the instant
  // before the chief noticed.
  EXPECT_GE(restored, newest) << chief;
  EXPECT_THAT(chief, HasSubstr("(generation 2)"));
  const std::string w1 = c.Log("worker-1");
  EXPECT_THAT(w1, HasSubstr("lost the ps at global step "));
  EXPECT_THAT(w1, HasSubstr(absl::StrCat("the ps were restored to the checkpoint at global step ",
                                         restored, " (generation 2, was 1) after ")));
  EXPECT_THAT(c.Log("ps-1-again"),
              HasSubstr(absl::StrCat(" tensors at step ", restored, " from ")));
  // What the note quotes: from the PS's death to training resumed, and the
  // global steps lost (trained since the checkpoint, done again).
  const size_t after = w1.find(") after ", w1.find("the ps were restored"));
  ASSERT_NE(after, std::string::npos);
  absl::Duration resumed;
  ASSERT_TRUE(absl::ParseDuration(w1.substr(after + 8, w1.find(';', after) - after - 8), &resumed))
      << w1.substr(after, 40);
  std::printf(
      "recovery: %.3f s from the PS's death to training resumed (replica worker:1); "
      "global steps lost %d\n",
      absl::ToDoubleSeconds(resumed), static_cast<int>(NumberAfter(w1, "global steps lost: ")));
  const Json metrics = c.Metrics();
  EXPECT_GE(FindMember(metrics, "test_accuracy")->get<double>(), 0.83);
  EXPECT_GE(FindMember(metrics, "global_step")->get<double>(), 3 * 1875);
}

// kill -9 a PS while it writes a checkpoint: that checkpoint never becomes
// complete, the previous one still loads, and the job resumes from it.
TEST(RecoveryTest, PsKilledWhileWritingACheckpointFallsBackToThePreviousOne) {
  Cluster c("ckpt_crash");
  // ps:1 pauses 3 s with each shard it writes whole under its temporary
  // name, before the shard is synced and renamed into place.
  c.StartAll({"--epochs=2", "--checkpoint_secs=0", "--checkpoint_steps=1000"},
             absl::Seconds(3));
  std::string partial;
  int64_t previous = -1;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        for (int64_t step : ListCheckpointSteps(c.out())) {
          const std::string tmp = ShardPath(c.out(), step, 1, 2) + ".tmp";
          if (step > 0 && std::filesystem::exists(tmp)) {
            partial = CheckpointDir(c.out(), step);
            previous = c.IndexStep();
            return true;
          }
        }
        return false;
      },
      absl::Seconds(90)))
      << c.Log("chief-0");
  c.Kill("ps-1");
  EXPECT_FALSE(std::filesystem::exists(partial + "/MANIFEST"));
  ASSERT_GE(previous, 0);
  c.Start("ps", 1, {});
  std::map<std::string, int> codes = c.WaitAll(absl::Seconds(180));
  for (const auto& [name, code] : codes) EXPECT_EQ(code, 0) << name << "\n" << c.Log(name);
  const std::string chief = c.Log("chief-0");
  EXPECT_THAT(chief, HasSubstr("checkpoint failed: "));
  EXPECT_THAT(chief, HasSubstr(absl::StrCat("restored every ps to the checkpoint at step ",
                                            previous, " in ")));
  EXPECT_GE(FindMember(c.Metrics(), "test_accuracy")->get<double>(), 0.80);
}

// A sync job without backups loses a worker: the other replicas fail within
// --sync_wait_secs, naming it, and exit with the retryable code; the PS are
// left running for their restart.
TEST(RecoveryTest, SyncWithoutBackupsNamesTheLostWorkerWithinTheDeadline) {
  Cluster c("sync_lost");
  // The wait has room for a replica that starts late on a loaded machine
  // (the first round waits for all three) and still ends well within the
  // deadline below.
  c.StartAll(
      {"--consistency=sync", "--max_steps=1000000", "--sync_wait_secs=10", "--checkpoint_secs=0"});
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return c.Log("worker-1").find("/1000000 - loss") != std::string::npos; },
      absl::Seconds(60)))
      << c.Log("worker-1");
  c.Kill("worker-1");
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return c.Log("chief-0").find(
                   "leaving the ps running: the failure is retryable (exit "
                   "138)") != std::string::npos &&
               c.Log("worker-0").find("failed: ") != std::string::npos;
      },
      absl::Seconds(60)))
      << c.Log("chief-0");
  EXPECT_LT(absl::Now() - killed, absl::Seconds(30));
  absl::SleepFor(absl::Seconds(1));
  for (const char* ps : {"ps-0", "ps-1"}) {
    EXPECT_THAT(c.Log(ps), ::testing::Not(HasSubstr("stopping: "))) << ps;
    c.Kill(ps);
  }
  std::map<std::string, int> codes = c.WaitAll(absl::Seconds(60));
  EXPECT_EQ(codes["chief-0"], 138) << c.Log("chief-0");
  EXPECT_EQ(codes["worker-0"], 138) << c.Log("worker-0");
  for (const char* name : {"chief-0", "worker-0"}) {
    const std::string log = c.Log(name);
    EXPECT_THAT(log, HasSubstr("pull waited 10s: "));
    EXPECT_THAT(log, HasSubstr("none yet from replicas 2"));
    EXPECT_THAT(log, HasSubstr("2 is worker:1"));
  }
}

// The same loss with a backup replica (2 of 3 gradients per step): the job
// goes on and ends at its global step count without the lost worker.
TEST(RecoveryTest, SyncWithABackupGoesOnWhenAWorkerIsLost) {
  Cluster c("sync_backup");
  // --sync_wait_secs also bounds how long the chief waits for a lost backup.
  c.StartAll({"--consistency=sync", "--replicas_to_aggregate=2", "--epochs=2",
              "--checkpoint_secs=0", "--sync_wait_secs=5"});
  // At its first progress line, well before the job's 1874 steps are done.
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return c.Log("worker-1").find("/1874 - loss") != std::string::npos; },
      absl::Seconds(60)))
      << c.Log("worker-1");
  c.Kill("worker-1");
  std::map<std::string, int> codes = c.WaitAll(absl::Seconds(120));
  for (const auto& [name, code] : codes) EXPECT_EQ(code, 0) << name << "\n" << c.Log(name);
  EXPECT_THAT(c.Log("chief-0"), HasSubstr("ending the job without worker:1"));
  const Json metrics = c.Metrics();
  // 60000 examples per epoch, 2 batches of 32 per aggregated step.
  EXPECT_EQ(FindMember(metrics, "global_step")->get<double>(), 1874);
  EXPECT_GE(FindMember(metrics, "test_accuracy")->get<double>(), 0.75);
}

}  // namespace
}  // namespace pstrain
