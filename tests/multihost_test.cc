// Multi-host on one machine: each task of a job in a network namespace of
// its own, with its own address on a bridge (veth links, iproute2), so that
// the job trains across real network interfaces; then one worker's link is
// cut and the test asserts what a user sees. Skipped, saying why, where
// namespaces cannot be made (no privilege).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cluster/checkpoint_layout.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "base/testing/certs.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/task_set.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Pstrain() { return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/pstrain"); }

// iproute2's `ip`, looked up where Debian installs it (tests run with a
// minimal PATH).
std::string Ip() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "ip";
}

// Runs a command to completion (30 s at most); its output on failure.
absl::Status Run(const std::vector<std::string>& argv) {
  static int n = 0;
  SpawnOptions o;
  o.argv = argv;
  o.log_path = absl::StrCat(testing::TempDir(), "/cmd-", n++, ".log");
  auto pid = Spawn(o);
  if (!pid.ok()) return pid.status();
  auto e = WaitChild(*pid, absl::Seconds(30));
  if (!e.has_value()) {
    SignalChild(*pid, SIGKILL);
    WaitChild(*pid, absl::Seconds(5));
    return absl::DeadlineExceededError(absl::StrJoin(argv, " ") + ": still running after 30s");
  }
  if (e->code != 0) {
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": exit ", e->code, ": ",
                                            ReadFile(o.log_path).value_or("")));
  }
  return absl::OkStatus();
}

// A hub namespace holding a bridge, and one namespace per task joined to it
// by a veth pair; task k has address 10.77.0.(k + 1).
class Hosts {
 public:
  static constexpr int kPort = 7000;

  // Makes the namespaces; the first error (no privilege, no iproute2).
  absl::Status Create(const std::vector<std::string>& tasks) {
    prefix_ = absl::StrCat("pst", ::getpid() % 100000);
    hub_ = prefix_ + "hub";
    if (absl::Status s = Run({Ip(), "netns", "add", hub_}); !s.ok()) return s;
    made_.push_back(hub_);
    if (absl::Status s = Run({Ip(), "-n", hub_, "link", "add", "br0", "type", "bridge"}); !s.ok()) {
      return s;
    }
    if (absl::Status s = Run({Ip(), "-n", hub_, "link", "set", "br0", "up"}); !s.ok()) return s;
    for (size_t k = 0; k < tasks.size(); ++k) {
      const std::string ns = absl::StrCat(prefix_, "t", k);
      const std::string hub_end = absl::StrCat("h", k), task_end = absl::StrCat("eth", k);
      for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
               {Ip(), "netns", "add", ns},
               {Ip(), "-n", hub_, "link", "add", hub_end, "type", "veth", "peer", "name", task_end,
                "netns", ns},
               {Ip(), "-n", hub_, "link", "set", hub_end, "master", "br0", "up"},
               {Ip(), "-n", ns, "addr", "add", absl::StrCat(Address(k), "/24"), "dev", task_end},
               {Ip(), "-n", ns, "link", "set", task_end, "up"},
               {Ip(), "-n", ns, "link", "set", "lo", "up"}}) {
        if (absl::Status s = Run(cmd); !s.ok()) return s;
        if (cmd[2] == "add" && cmd[1] == "netns") made_.push_back(ns);
      }
      ns_[tasks[k]] = ns;
      link_[tasks[k]] = hub_end;
      address_[tasks[k]] = absl::StrCat(Address(k), ":", kPort);
    }
    return absl::OkStatus();
  }

  ~Hosts() {
    tasks_.KillAll();  // before their namespaces go
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      absl::Status s = Run({Ip(), "netns", "del", *it});
      if (!s.ok()) std::fprintf(stderr, "cleanup: %s\n", std::string(s.message()).c_str());
    }
  }

  static std::string Address(size_t k) { return absl::StrCat("10.77.0.", k + 1); }
  const std::string& address(const std::string& task) { return address_[task]; }

  // Starts `task` ("ps:0", "chief:0", "worker:1") in its namespace.
  void Start(const std::string& task, const std::string& tf_config,
             const std::vector<std::string>& flags) {
    SpawnOptions o;
    o.argv = {Ip(), "netns", "exec", ns_[task], Pstrain()};
    o.argv.insert(o.argv.end(), flags.begin(), flags.end());
    o.env = {{"TF_CONFIG", tf_config}};
    o.log_path = Log(task);
    ASSERT_OK(tasks_.Start(task, o));
  }

  std::string Log(const std::string& task) const {
    std::string name = task;
    name[name.find(':')] = '-';
    return absl::StrCat(testing::TempDir(), "/", prefix_, "-", name, ".log");
  }
  std::string LogText(const std::string& task) const { return ReadFile(Log(task)).value_or(""); }

  // Takes the task's link on the bridge down (packets to and from it are
  // dropped) or up again.
  absl::Status SetLink(const std::string& task, bool up) {
    return Run({Ip(), "-n", hub_, "link", "set", link_[task], up ? "up" : "down"});
  }

  void Kill(const std::string& task) { tasks_.Kill(task); }
  std::map<std::string, int> WaitAll(absl::Duration timeout) { return tasks_.WaitAll(timeout); }

 private:
  std::string prefix_, hub_;
  std::vector<std::string> made_;  // namespaces, in creation order
  std::map<std::string, std::string> ns_, link_, address_;
  testing::TaskSet tasks_;
};

const std::vector<std::string> kTasks = {"chief:0", "ps:0", "ps:1", "worker:0", "worker:1"};

// The TF_CONFIG of `task` in a cluster on `hosts`.
std::string TfConfigFor(Hosts& hosts, const std::string& task) {
  auto q = [&](const std::string& t) { return absl::StrCat("\"", hosts.address(t), "\""); };
  const size_t colon = task.find(':');
  return absl::StrCat(R"({"cluster": {"chief": [)", q("chief:0"), R"(], "ps": [)", q("ps:0"), ", ",
                      q("ps:1"), R"(], "worker": [)", q("worker:0"), ", ", q("worker:1"),
                      R"(]}, "task": {"type": ")", task.substr(0, colon), R"(", "index": )",
                      task.substr(colon + 1), "}}");
}

// Without namespaces: a task of a cluster on other hosts refuses to start
// with neither TLS nor a token, saying what to configure, whatever its role.
TEST(ExposedClusterTest, EveryRoleRefusesToStartWithoutTlsOrATokenUnlessInsecure) {
  const std::string cluster =
      R"("cluster": {"chief": ["10.77.0.1:7000"], "ps": ["10.77.0.2:7000"], )"
      R"("worker": ["10.77.0.4:7000"], "evaluator": ["10.77.0.5:7000"]})";
  for (const char* role : {"chief", "ps", "worker", "evaluator"}) {
    SpawnOptions o;
    o.argv = {Pstrain()};
    o.env = {{"TF_CONFIG",
              absl::StrCat("{", cluster, R"(, "task": {"type": ")", role, R"(", "index": 0}})")}};
    o.log_path = absl::StrCat(testing::TempDir(), "/exposed-", role, ".log");
    ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
    auto e = WaitChild(pid, absl::Seconds(20));
    ASSERT_TRUE(e.has_value()) << role;
    EXPECT_EQ(e->code, 2) << role;
    const std::string log = ReadFile(o.log_path).value_or("");
    EXPECT_THAT(log, HasSubstr("refusing to start without transport security: chief:0 at "
                               "10.77.0.1:7000 is reachable beyond this machine"))
        << role;
    EXPECT_THAT(log, HasSubstr("--tls_cert, --tls_key, --tls_ca"));
    EXPECT_THAT(log, HasSubstr("--insecure"));
  }
  // With --insecure the PS gets past the check (and then cannot bind an
  // address this machine does not have).
  SpawnOptions o;
  o.argv = {Pstrain(), "--insecure"};
  o.env = {{"TF_CONFIG", absl::StrCat("{", cluster, R"(, "task": {"type": "ps", "index": 0}})")}};
  o.log_path = testing::TempDir() + "/exposed-insecure.log";
  ASSERT_OK_AND_ASSIGN(pid_t pid, Spawn(o));
  auto e = WaitChild(pid, absl::Seconds(20));
  ASSERT_TRUE(e.has_value());
  const std::string log = ReadFile(o.log_path).value_or("");
  EXPECT_THAT(log, HasSubstr("--insecure: no TLS and no cluster token"));
  EXPECT_THAT(log, HasSubstr("cannot listen on 10.77.0.2:7000"));
}

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status made = hosts_.Create(kTasks);
    if (!made.ok()) {
      GTEST_SKIP() << "network namespaces cannot be made here (root and iproute2 needed): "
                   << made.message();
    }
    out_ =
        testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(MakeDirs(out_));
  }

  // Certificates for every task's address and a token, made as a user
  // would (deploy/make_certs.sh); the flags that give them to a task.
  std::vector<std::string> SecureFlags() {
    std::vector<std::string> hosts;
    for (size_t k = 0; k < kTasks.size(); ++k) hosts.push_back(Hosts::Address(k));
    auto made = testing::MakeCerts("job", hosts);
    EXPECT_OK(made.status());
    const std::string dir = made.value_or("");
    return {"--tls_cert=" + dir + "/cert.pem", "--tls_key=" + dir + "/key.pem",
            "--tls_ca=" + dir + "/ca.pem", "--token_file=" + dir + "/token"};
  }

  // `security`: flags every task gets (TLS and token, or --insecure).
  void StartJob(const std::vector<std::string>& job, const std::vector<std::string>& security) {
    for (const std::string& task : kTasks) {
      std::vector<std::string> flags = security;
      if (task.rfind("ps", 0) != 0) {
        flags.insert(flags.end(), job.begin(), job.end());
        flags.push_back("--output_dir=" + out_);
        // A task cut off from the cluster gives up after this.
        flags.push_back("--ps_wait_s=20");
        // The namespaces share this machine's /dev/shm, which separate hosts
        // would not: tensor bytes cross the links, as between hosts.
        flags.push_back("--noshared_memory");
      }
      hosts_.Start(task, TfConfigFor(hosts_, task), flags);
    }
  }

  int64_t IndexStep() const {
    auto index = ReadCheckpointIndex(out_);
    return index.ok() ? index->step : -1;
  }

  Hosts hosts_;
  std::string out_;
};

// Async: with worker:1's link cut, the others keep training (checkpoints
// land at global steps that move on); once the link is back, worker:1
// carries on too and the job ends well.
TEST_F(MultiHostTest, AsyncGoesOnWhileAWorkerIsCutOff) {
  StartJob({"--epochs=3", "--checkpoint_secs=1"}, SecureFlags());
  ASSERT_TRUE(testing::WaitUntil([&] { return IndexStep() > 0; }, absl::Seconds(60)))
      << hosts_.LogText("chief:0");
  ASSERT_OK(hosts_.SetLink("worker:1", false));
  const absl::Time cut = absl::Now();
  const int64_t before = IndexStep();
  // While the link is down, checkpoints go on at steps the others trained:
  // wait for one at least 100 global steps on.
  int64_t during = before;
  const bool moved_on = testing::WaitUntil(
      [&] {
        during = IndexStep();
        return during > before + 100;
      },
      absl::Seconds(60));
  const double down_s = absl::ToDoubleSeconds(absl::Now() - cut);
  ASSERT_OK(hosts_.SetLink("worker:1", true));
  std::printf(
      "multihost async: link of worker:1 down %.1f s; global step at the checkpoints "
      "%d -> %d meanwhile\n",
      down_s, static_cast<int>(before), static_cast<int>(during));
  EXPECT_TRUE(moved_on) << "the checkpoints stayed at step " << during << " (from " << before
                        << ") while worker:1 was cut off\n"
                        << hosts_.LogText("chief:0");
  std::map<std::string, int> codes = hosts_.WaitAll(absl::Seconds(180));
  for (const auto& [name, code] : codes) {
    EXPECT_EQ(code, 0) << name << "\n" << hosts_.LogText(name);
  }
  // Every task talked over its own address.
  EXPECT_THAT(hosts_.LogText("chief:0"), HasSubstr("coordinator serving on 10.77.0.1:7000"));
  EXPECT_THAT(hosts_.LogText("ps:1"),
              HasSubstr("serving on 10.77.0.3:7000 (2 ps in the job) with mutual TLS and a "
                        "cluster token"));
  // The exchange frames went over the PS's frame port inside TLS, each PS's
  // certificate checked against the address dialled.
  EXPECT_THAT(hosts_.LogText("ps:1"),
              ::testing::ContainsRegex(", inside TLS 1\\.3 with the job's certificates, records "
                                       "sealed (and opened by the kernel|by OpenSSL \\(.+\\))"));
  for (const char* ps : {"ps:0 (10.77.0.2:7000)", "ps:1 (10.77.0.3:7000)"}) {
    EXPECT_THAT(hosts_.LogText("worker:0"),
                HasSubstr(absl::StrCat(ps, ": Exchange frames over TCP (10.77.0.")));
  }
  // Its records sealed by the kernel where it has TLS, else by OpenSSL,
  // which the log line names with the reason.
  EXPECT_THAT(hosts_.LogText("worker:0"),
              ::testing::ContainsRegex(", TLSv1.3 \\(TLS_AES_128_GCM_SHA256\\), records sealed "
                                       "(and opened by the kernel\\)|by OpenSSL in this process "
                                       "\\(.+\\)\\))"));
  auto text = ReadFile(out_ + "/final_metrics.json");
  ASSERT_OK(text);
  ASSERT_OK_AND_ASSIGN(Json metrics, ParseJson(*text));
  EXPECT_GE(FindMember(metrics, "test_accuracy")->get<double>(), 0.83);
  EXPECT_EQ(FindMember(metrics, "replicas")->size(), 3u);
}

// Sync: with worker:1's link cut, the chief and worker:0 fail within
// --sync_wait_secs, naming the silent task; the chief stops the PS.
TEST_F(MultiHostTest, SyncNamesTheSilentWorkerWithinTheDeadline) {
  StartJob(
      {"--consistency=sync", "--max_steps=1000000", "--sync_wait_secs=4", "--checkpoint_secs=0"},
      {"--insecure"});
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return hosts_.LogText("worker:1").find("/1000000 - loss") != std::string::npos; },
      absl::Seconds(60)))
      << hosts_.LogText("worker:1");
  ASSERT_OK(hosts_.SetLink("worker:1", false));
  const absl::Time cut = absl::Now();
  // worker:1 hears nothing and would wait --ps_wait_s; it is the silent one.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return hosts_.LogText("chief:0").find("job failed: ") != std::string::npos &&
               hosts_.LogText("worker:0").find("failed: ") != std::string::npos;
      },
      absl::Seconds(60)))
      << hosts_.LogText("chief:0");
  const double seconds = absl::ToDoubleSeconds(absl::Now() - cut);
  std::printf(
      "multihost sync: chief and worker:0 failed %.1f s after worker:1's link was cut "
      "(--sync_wait_secs=4)\n",
      seconds);
  EXPECT_LT(seconds, 20);
  // The failure is retryable: the chief leaves the PS running for its
  // restart (an orchestrator restarting by exit code would never bring back
  // a PS that exited 0).
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return hosts_.LogText("chief:0").find(
                   "leaving the ps running: the failure is retryable "
                   "(exit 138)") != std::string::npos;
      },
      absl::Seconds(30)))
      << hosts_.LogText("chief:0");
  hosts_.Kill("worker:1");
  absl::SleepFor(absl::Seconds(1));
  for (const char* ps : {"ps:0", "ps:1"}) {
    EXPECT_THAT(hosts_.LogText(ps), ::testing::Not(HasSubstr("stopping: "))) << ps;
    hosts_.Kill(ps);
  }
  std::map<std::string, int> codes = hosts_.WaitAll(absl::Seconds(60));
  EXPECT_EQ(codes["chief:0"], 138);
  EXPECT_EQ(codes["worker:0"], 138);
  for (const char* task : {"chief:0", "worker:0"}) {
    const std::string log = hosts_.LogText(task);
    EXPECT_THAT(log, HasSubstr("pull waited 4s: "));
    // Replica 2, worker:1, among those missing (a replica stuck behind the
    // cut one at another PS may be listed too).
    EXPECT_THAT(log, ::testing::ContainsRegex("none yet from replicas ([0-9], )*2 \\(replica "));
    EXPECT_THAT(log, HasSubstr("2 is worker:1)"));
  }
}

}  // namespace
}  // namespace pstrain
