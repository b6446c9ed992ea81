#include "cluster/tf_config.h"

#include <string>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// The UAI-Train layout for 4 nodes: master on node 0 at the worker port, a PS
// on every node, workers on the other nodes.
constexpr char kUai4Nodes[] = R"({
  "cluster": {
    "master": ["10.0.0.1:2222"],
    "ps": ["10.0.0.1:2223", "10.0.0.2:2223", "10.0.0.3:2223", "10.0.0.4:2223"],
    "worker": ["10.0.0.2:2222", "10.0.0.3:2222", "10.0.0.4:2222"]
  },
  "task": {"type": "ps", "index": 3},
  "environment": "cloud"
})";

TEST(TfConfigTest, ParsesUaiTrainFourNodeLayout) {
  ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(kUai4Nodes));
  ASSERT_TRUE(cfg.cluster.chief.has_value());
  EXPECT_TRUE(cfg.cluster.chief_named_master);
  EXPECT_EQ(cfg.cluster.chief->ToString(), "10.0.0.1:2222");
  ASSERT_EQ(cfg.cluster.ps.size(), 4u);
  ASSERT_EQ(cfg.cluster.worker.size(), 3u);
  EXPECT_EQ(cfg.task.role, Role::kPs);
  EXPECT_EQ(cfg.task.index, 3);
  EXPECT_EQ(cfg.environment, "cloud");
  EXPECT_EQ(cfg.task_address()->ToString(), "10.0.0.4:2223");
  EXPECT_FALSE(cfg.HasChiefDuties());
  EXPECT_EQ(cfg.chief_duties_address()->ToString(), "10.0.0.1:2222");
  EXPECT_OK(ValidateForParameterServerTraining(cfg));
}

TEST(TfConfigTest, MasterTaskIsTheChief) {
  std::string json = kUai4Nodes;
  json.replace(json.find(R"("type": "ps", "index": 3)"),
               std::string(R"("type": "ps", "index": 3)").size(),
               R"("type": "master", "index": 0)");
  ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(json));
  EXPECT_EQ(cfg.task.role, Role::kChief);
  EXPECT_TRUE(cfg.HasChiefDuties());
  EXPECT_EQ(cfg.task_address()->ToString(), "10.0.0.1:2222");
}

TEST(TfConfigTest, ParsesTwoWorkerMultiWorkerMirroredExample) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg,
      ParseTfConfig(R"({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
                        "task": {"type": "worker", "index": 1}})"));
  EXPECT_FALSE(cfg.cluster.chief.has_value());
  EXPECT_EQ(cfg.cluster.worker.size(), 2u);
  EXPECT_EQ(cfg.task_address()->ToString(), "localhost:23456");
  EXPECT_FALSE(cfg.HasChiefDuties());
  EXPECT_EQ(cfg.chief_duties_address()->ToString(), "localhost:12345");
  // It parses, but a parameter-server job cannot run without a ps.
  absl::Status s = ValidateForParameterServerTraining(cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cluster.ps is empty"));
}

TEST(TfConfigTest, WorkerZeroTakesChiefDutiesWithoutChief) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg,
      ParseTfConfig(R"({"cluster": {"worker": ["a:1", "b:1"], "ps": ["c:1"]},
                        "task": {"type": "worker", "index": 0}})"));
  EXPECT_TRUE(cfg.HasChiefDuties());
}

constexpr char kChiefPsWorkerEvaluator[] = R"({
  "cluster": {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
              "worker": ["host3:2222", "host4:2222"], "evaluator": ["host5:2222"]},
  "task": {"type": "evaluator", "index": 0},
  "rpc_layer": "grpc", "job": {"name": "x"}
})";

// Every replica type listed, as Kubeflow's TFJob writes it.
TEST(TfConfigTest, ParsesChiefPsWorkerEvaluatorAndIgnoresUnknownKeys) {
  ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(kChiefPsWorkerEvaluator));
  EXPECT_FALSE(cfg.cluster.chief_named_master);
  EXPECT_EQ(cfg.cluster.Count(Role::kChief), 1);
  EXPECT_EQ(cfg.cluster.Count(Role::kPs), 2);
  EXPECT_EQ(cfg.cluster.Count(Role::kWorker), 2);
  EXPECT_EQ(cfg.cluster.Count(Role::kEvaluator), 1);
  EXPECT_EQ(cfg.task.role, Role::kEvaluator);
  EXPECT_EQ(cfg.task_address()->ToString(), "host5:2222");
  EXPECT_FALSE(cfg.HasChiefDuties());
  EXPECT_EQ(cfg.environment, "");
}

TEST(TfConfigTest, EvaluatorLeftOutOfClusterAsAiPlatformWritesIt) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg,
      ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w:1"]},
                        "task": {"type": "evaluator", "index": 0}})"));
  EXPECT_EQ(cfg.task.role, Role::kEvaluator);
  EXPECT_FALSE(cfg.task_address().has_value());
  EXPECT_EQ(cfg.cluster.Count(Role::kEvaluator), 0);
}

TEST(TfConfigTest, ParsesIpv6Addresses) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg,
      ParseTfConfig(R"({"cluster": {"ps": ["[::1]:2222"], "worker": ["[fe80::1%eth0]:2223"]},
                        "task": {"type": "ps", "index": 0}})"));
  EXPECT_EQ(cfg.cluster.ps[0].host, "::1");
  EXPECT_EQ(cfg.cluster.ps[0].port, 2222);
  EXPECT_EQ(cfg.cluster.ps[0].ToString(), "[::1]:2222");
  EXPECT_EQ(cfg.cluster.worker[0].host, "fe80::1%eth0");
}

TEST(TfConfigTest, RoundTripsThroughToJson) {
  ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(kUai4Nodes));
  ASSERT_OK_AND_ASSIGN(TfConfig again, ParseTfConfig(cfg.ToJson()));
  EXPECT_EQ(again.ToJson(), cfg.ToJson());
  EXPECT_TRUE(again.cluster.chief_named_master);
  EXPECT_EQ(again.task.index, 3);
  EXPECT_EQ(again.environment, "cloud");
}

TEST(TfConfigTest, TrainingReplicasPutATrainingChiefFirst) {
  ASSERT_OK_AND_ASSIGN(TfConfig cfg, ParseTfConfig(kUai4Nodes));
  auto names = [](const std::vector<TaskId>& ids) {
    std::vector<std::string> out;
    for (const TaskId& id : ids) out.push_back(id.ToString());
    return out;
  };
  EXPECT_EQ(names(TrainingReplicas(cfg.cluster, true)),
            (std::vector<std::string>{"chief:0", "worker:0", "worker:1", "worker:2"}));
  EXPECT_EQ(names(TrainingReplicas(cfg.cluster, false)),
            (std::vector<std::string>{"worker:0", "worker:1", "worker:2"}));
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kChief, 0}, true), 0);
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kWorker, 2}, true), 3);
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kWorker, 2}, false), 2);
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kChief, 0}, false), -1);
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kPs, 0}, true), -1);
  // Without a chief, worker 0 is replica 0 either way.
  cfg.cluster.chief.reset();
  EXPECT_EQ(ReplicaIndexOf(cfg.cluster, {Role::kWorker, 0}, true), 0);
  EXPECT_EQ(TrainingReplicas(cfg.cluster, true).size(), 3u);
}

TEST(TfConfigTest, StringIndexIsAccepted) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg, ParseTfConfig(R"({"cluster": {"ps": ["a:1", "b:2"]},
                                      "task": {"type": "ps", "index": "1"}})"));
  EXPECT_EQ(cfg.task.index, 1);
}

TEST(TfConfigTest, MissingIndexMeansZero) {
  ASSERT_OK_AND_ASSIGN(TfConfig cfg,
                       ParseTfConfig(R"({"cluster": {"ps": ["a:1"]},
                                         "task": {"type": "ps"}})"));
  EXPECT_EQ(cfg.task.index, 0);
}

// A task outside the cluster its TF_CONFIG names (an index out of range, a
// type with no entries) is read as given, so it can tell the chief; any
// other refused TF_CONFIG, and a good one, is not.
TEST(TfConfigTest, ATaskOutsideItsClusterIsReadSoItCanTellTheChief) {
  const char* outside = R"({"cluster": {"chief": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]},
                            "task": {"type": "worker", "index": 5}})";
  EXPECT_FALSE(ParseTfConfig(outside).ok());
  std::optional<TfConfig> cfg = TaskOutsideItsCluster(outside);
  ASSERT_TRUE(cfg.has_value());
  EXPECT_EQ(cfg->task.ToString(), "worker:5");
  EXPECT_EQ(cfg->chief_duties_address()->ToString(), "a:1");
  EXPECT_EQ(cfg->coordinator_address()->ToString(), "a:1");
  cfg = TaskOutsideItsCluster(R"({"cluster": {"worker": ["c:1"]},
                                  "task": {"type": "ps", "index": 0}})");
  ASSERT_TRUE(cfg.has_value());
  EXPECT_EQ(cfg->task.ToString(), "ps:0");
  EXPECT_EQ(cfg->chief_duties_address()->ToString(), "c:1");
  // No ps: worker 0's address is its ring's, not a Coordinator's.
  EXPECT_FALSE(cfg->coordinator_address().has_value());
  EXPECT_FALSE(TaskOutsideItsCluster(R"({"cluster": {"worker": ["c:1"]},
                                      "task": {"type": "worker", "index": 0}})").has_value());
  EXPECT_FALSE(TaskOutsideItsCluster(R"({"cluster": {"worker": ["c:1", "c:1"]},
                                      "task": {"type": "worker", "index": 5}})").has_value());
  EXPECT_FALSE(TaskOutsideItsCluster(R"({"cluster": {"worker": ["c:1"]},
                                      "task": {"type": "worker", "index": -1}})").has_value());
}

struct ErrorCase {
  const char* name;
  const char* json;
  const char* message;  // the whole expected message
};

class TfConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(TfConfigErrorTest, RejectsWithOneLineNamingTheField) {
  auto cfg = ParseTfConfig(GetParam().json);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cfg.status().message(), GetParam().message);
  EXPECT_EQ(std::string(cfg.status().message()).find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    AllErrors, TfConfigErrorTest,
    ::testing::Values(
        ErrorCase{"Empty", "", "TF_CONFIG is empty"},
        ErrorCase{"TruncatedJson", R"({"cluster":)",
                  "TF_CONFIG is not valid JSON: expected a value at offset 11, found end of input"},
        ErrorCase{"TrailingGarbage", R"({"cluster": {}, "task": {}} x)",
                  "TF_CONFIG is not valid JSON: expected end of input at offset 28, found 'x'"},
        ErrorCase{"NotAnObject", "[1]", "TF_CONFIG must be a JSON object, not array"},
        ErrorCase{"MissingCluster", R"({"task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG has no \"cluster\" object"},
        ErrorCase{"ClusterNotObject", R"({"cluster": [], "task": {}})",
                  "TF_CONFIG cluster must be an object, not array"},
        ErrorCase{"MissingTask", R"({"cluster": {"ps": ["a:1"]}})",
                  "TF_CONFIG has no \"task\" object"},
        ErrorCase{"MissingType", R"({"cluster": {"ps": ["a:1"]}, "task": {"index": 0}})",
                  "TF_CONFIG task has no \"type\""},
        ErrorCase{"UnknownType",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "trainer", "index": 0}})",
                  "TF_CONFIG task.type \"trainer\" is not one of chief, master, ps, worker, evaluator"},
        ErrorCase{"UnknownClusterKey",
                  R"({"cluster": {"ps": ["a:1"], "gpu": ["b:1"]}, "task": {"type": "ps"}})",
                  "TF_CONFIG cluster.gpu is not a known role (expected one of chief, master, ps, worker, evaluator)"},
        ErrorCase{"IndexOutOfRange",
                  R"({"cluster": {"ps": ["a:1"], "worker": ["b:1", "c:1"]},
                      "task": {"type": "worker", "index": 3}})",
                  "TF_CONFIG task.index 3 out of range: cluster.worker has 2 entries"},
        ErrorCase{"IndexOutOfRangeMaster",
                  R"({"cluster": {"master": ["a:1"], "ps": ["b:1"]},
                      "task": {"type": "master", "index": 1}})",
                  "TF_CONFIG task.index 1 out of range: cluster.master has 1 entry"},
        ErrorCase{"NegativeIndex",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": -1}})",
                  "TF_CONFIG task.index -1 must be a non-negative integer"},
        ErrorCase{"FractionalIndex",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0.5}})",
                  "TF_CONFIG task.index 0.5 must be a non-negative integer"},
        ErrorCase{"IndexNotANumber",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": "one"}})",
                  "TF_CONFIG task.index \"one\" is not an integer"},
        ErrorCase{"TaskTypeNotInCluster",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}})",
                  "TF_CONFIG task.type \"worker\" has no entries in cluster.worker"},
        ErrorCase{"ChiefAndMaster",
                  R"({"cluster": {"chief": ["a:1"], "master": ["b:1"], "ps": ["c:1"]},
                      "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster has both \"chief\" and \"master\"; they are the same role, give one"},
        ErrorCase{"TwoChiefs",
                  R"({"cluster": {"chief": ["a:1", "b:1"], "ps": ["c:1"]},
                      "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.chief must hold exactly one address, has 2"},
        ErrorCase{"EmptyAddress",
                  R"({"cluster": {"ps": ["a:1", ""]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[1] is empty"},
        ErrorCase{"DuplicateAddress",
                  R"({"cluster": {"ps": ["a:1"], "worker": ["b:1", "a:1"]},
                      "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.worker[1] \"a:1\" duplicates cluster.ps[0]"},
        ErrorCase{"PortNotANumber",
                  R"({"cluster": {"ps": ["host:abc"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"host:abc\": port \"abc\" is not a number"},
        ErrorCase{"PortOutOfRange",
                  R"({"cluster": {"ps": ["host:70000"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"host:70000\": port 70000 is outside 1..65535"},
        ErrorCase{"MissingPort",
                  R"({"cluster": {"ps": ["host"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"host\": missing ':port'"},
        ErrorCase{"EmptyHost",
                  R"({"cluster": {"ps": [":80"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \":80\": empty host"},
        ErrorCase{"BareIpv6",
                  R"({"cluster": {"ps": ["::1:80"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"::1:80\": IPv6 hosts must be written as [addr]:port"},
        ErrorCase{"HostWithBadCharacters",
                  R"({"cluster": {"ps": ["a b/c:80"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"a b/c:80\": a host holds only letters, digits, "
                  "'-', '_' and '.'"},
        ErrorCase{"BracketsAroundAName",
                  R"({"cluster": {"ps": ["[[x]:80"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"[[x]:80\": an IPv6 host holds only hex digits, "
                  "':', '.' and a '%zone'"},
        ErrorCase{"BracketedNotIpv6",
                  R"({"cluster": {"ps": ["[host]:80"]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] \"[host]:80\": a bracketed host must be an IPv6 "
                  "address"},
        ErrorCase{"AddressNotString",
                  R"({"cluster": {"ps": [80]}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps[0] must be a \"host:port\" string, not number"},
        ErrorCase{"ListNotArray",
                  R"({"cluster": {"ps": "a:1"}, "task": {"type": "ps", "index": 0}})",
                  "TF_CONFIG cluster.ps must be an array of \"host:port\" strings, not string"},
        ErrorCase{"EnvironmentNotString",
                  R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}, "environment": 1})",
                  "TF_CONFIG environment must be a string, not number"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace pstrain
