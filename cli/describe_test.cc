#include "cli/describe.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(DescribeTest, TextListsTaskThenOneClusterTaskPerLine) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg,
      ParseTfConfig(R"({"cluster": {"master": ["10.0.0.1:2222"], "ps": ["10.0.0.1:2223", "10.0.0.2:2223"],
                                    "worker": ["10.0.0.2:2222"]},
                        "task": {"type": "worker", "index": 0}, "environment": "cloud"})"));
  EXPECT_EQ(DescribeText(cfg),
            "task: worker:0 10.0.0.2:2222\n"
            "environment: cloud\n"
            "chief duties: master:0\n"
            "mode: parameter servers (2 ps)\n"
            "cluster:\n"
            "master:0 10.0.0.1:2222\n"
            "ps:0 10.0.0.1:2223\n"
            "ps:1 10.0.0.2:2223\n"
            "worker:0 10.0.0.2:2222\n");
}

TEST(DescribeTest, JsonHasTaskAndCluster) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg, ParseTfConfig(R"({"cluster": {"ps": ["[::1]:1"], "worker": ["a:2", "b:3"]},
                                      "task": {"type": "ps", "index": 0}})"));
  EXPECT_EQ(DescribeJson(cfg),
            R"j({"chief_duties":"worker:0 (the cluster has no chief)","cluster":[)j"
            R"({"address":"[::1]:1","index":0,"type":"ps"},)"
            R"({"address":"a:2","index":0,"type":"worker"},)"
            R"({"address":"b:3","index":1,"type":"worker"}],"environment":"","mode":"ps",)"
            R"("task":{"address":"[::1]:1","index":0,"type":"ps"}})"
            "\n");
}

TEST(DescribeTest, AClusterWithoutPsTrainsByAllReduce) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg, ParseTfConfig(R"({"cluster": {"worker": ["127.0.0.1:23456", "127.0.0.1:23457"]},
                                      "task": {"type": "worker", "index": 0}})"));
  EXPECT_EQ(DescribeText(cfg),
            "task: worker:0 127.0.0.1:23456\n"
            "environment: (none)\n"
            "chief duties: worker:0 (the cluster has no chief)\n"
            "mode: all-reduce (no ps: 2 replicas in a ring)\n"
            "cluster:\n"
            "worker:0 127.0.0.1:23456\n"
            "worker:1 127.0.0.1:23457\n");
}

TEST(DescribeTest, EvaluatorOutsideClusterHasNoAddress) {
  ASSERT_OK_AND_ASSIGN(
      TfConfig cfg, ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w:1"]},
                                      "task": {"type": "evaluator", "index": 0}})"));
  EXPECT_EQ(DescribeText(cfg).substr(0, DescribeText(cfg).find('\n')),
            "task: evaluator:0 (no address: evaluator not listed in cluster)");
}

}  // namespace
}  // namespace pstrain
