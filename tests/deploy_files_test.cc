// The deployment files say what a job needs: every TF_CONFIG in
// deploy/docker-compose.yml parses, all describe one cluster whose hosts are
// the compose services (the evaluator listed, as TFJob lists it), and each
// task of it is started exactly once; the TFJob manifest has the four
// replica types with the exit-code restart policy that pstrain's exit codes
// are made for, and one argument list. deploy/manifests_test.py reads the
// same files as YAML for the rest.
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "cluster/tf_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/", path);
}

TEST(DeployFilesTest, ComposeTfConfigsDescribeOneClusterOfItsServices) {
  ASSERT_OK_AND_ASSIGN(std::string compose, ReadFile(Runfile("deploy/docker-compose.yml")));
  std::set<std::string> services;
  std::map<std::string, std::string> tasks;  // "ps:1" -> service
  std::string service, cluster;
  bool in_services = false;
  for (absl::string_view line : absl::StrSplit(compose, '\n')) {
    if (line == "services:") in_services = true;
    if (in_services && line.size() > 3 && line.substr(0, 2) == "  " && line[2] != ' ' &&
        absl::EndsWith(line, ":")) {
      service = std::string(line.substr(2, line.size() - 3));
      services.insert(service);
    }
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&rest, "TF_CONFIG: '")) continue;
    ASSERT_TRUE(absl::ConsumeSuffix(&rest, "'")) << line;
    ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(rest));
    EXPECT_OK(ValidateForParameterServerTraining(cfg));
    EXPECT_EQ(cfg.environment, "cloud");
    EXPECT_TRUE(tasks.emplace(cfg.task.ToString(), service).second) << cfg.task.ToString();
    TfConfig without_task = cfg;
    without_task.task = {};
    if (cluster.empty()) cluster = without_task.ToJson();
    EXPECT_EQ(without_task.ToJson(), cluster) << service;
    // A training task's own address names its own service.
    if (cfg.task_address().has_value()) {
      EXPECT_EQ(cfg.task_address()->host, service);
    }
  }
  EXPECT_EQ(tasks.size(), 6u);
  for (const char* task : {"chief:0", "ps:0", "ps:1", "worker:0", "worker:1", "evaluator:0"}) {
    EXPECT_EQ(tasks.count(task), 1u) << task;
  }
  ASSERT_OK_AND_ASSIGN(TfConfig any, ParseTfConfig(absl::StrCat(
                                          cluster.substr(0, cluster.size() - 1), "}")));
  for (Role role : {Role::kChief, Role::kPs, Role::kWorker, Role::kEvaluator}) {
    for (int i = 0; i < any.cluster.Count(role); ++i) {
      EXPECT_EQ(services.count(any.cluster.Address(role, i).host), 1u)
          << any.cluster.Address(role, i).host;
    }
  }
}

TEST(DeployFilesTest, TfJobHasEveryReplicaTypeWithExitCodeRestarts) {
  ASSERT_OK_AND_ASSIGN(std::string tfjob, ReadFile(Runfile("deploy/k8s/tfjob.yaml")));
  for (const char* replica : {"    Chief:\n", "    PS:\n", "    Worker:\n", "    Evaluator:\n"}) {
    const size_t at = tfjob.find(replica);
    ASSERT_NE(at, std::string::npos) << replica;
    EXPECT_EQ(tfjob.find("      restartPolicy: ExitCode\n", at),
              tfjob.find("restartPolicy", at) - 6)
        << replica;
  }
  EXPECT_THAT(tfjob, ::testing::HasSubstr("claimName: pstrain-output"));
  EXPECT_THAT(tfjob, ::testing::HasSubstr("mountPath: /data/output"));
  // Worker shares the Chief's pod template; every replica its arguments.
  const size_t worker = tfjob.find("    Worker:\n");
  EXPECT_NE(tfjob.find("template: *trainer", worker), std::string::npos);
  EXPECT_EQ(tfjob.find("args: &args"), tfjob.find("args:"));
  int shared_args = 0;
  for (size_t at = tfjob.find("args: *args"); at != std::string::npos;
       at = tfjob.find("args: *args", at + 1)) {
    ++shared_args;
  }
  EXPECT_EQ(shared_args, 2);  // PS and Evaluator
}

}  // namespace
}  // namespace pstrain
