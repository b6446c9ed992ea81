#include "job/job_description.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<VariableDef> Mlp(int64_t hidden) {
  std::vector<VariableDef> v(4);
  v[0].name = "dense_0/kernel";
  v[0].shape = {784, hidden};
  v[1].name = "dense_0/bias";
  v[1].shape = {hidden};
  v[2].name = "dense_1/kernel";
  v[2].shape = {hidden, 10};
  v[3].name = "dense_1/bias";
  v[3].shape = {10};
  return v;
}

TEST(JobDescriptionTest, TheSameModelHasNoDifferences) {
  EXPECT_THAT(ModelDifferences(DescribeModel(Mlp(128), "adam"), DescribeModel(Mlp(128), "adam"),
                               "on disk", "in this job"),
              IsEmpty());
}

TEST(JobDescriptionTest, EveryModelDifferenceIsNamed) {
  std::vector<VariableDef> now = Mlp(64);
  now.pop_back();  // dense_1/bias gone
  VariableDef table;
  table.name = "ids";
  table.shape = {1000, 8};
  table.embedding = true;
  now.push_back(table);
  EXPECT_THAT(ModelDifferences(DescribeModel(Mlp(128), "adam"), DescribeModel(now, "sgd"),
                               "on disk", "in this job"),
              ElementsAre("optimizer: adam on disk, sgd in this job",
                          "dense_0/kernel: shape [784, 128] on disk, shape [784, 64] in this job",
                          "dense_0/bias: shape [128] on disk, shape [64] in this job",
                          "dense_1/kernel: shape [128, 10] on disk, shape [64, 10] in this job",
                          "dense_1/bias: shape [10] on disk, not in this job",
                          "ids: not on disk, table [1000, 8] in this job"));
}

// Two unrelated models differ in every variable: a message names the first
// eight and counts the rest.
TEST(JobDescriptionTest, AMessageNamesTheFirstDifferencesAndCountsTheRest) {
  std::vector<std::string> diff;
  for (int i = 0; i < 3; ++i) diff.push_back(absl::StrCat("v", i, ": not on disk"));
  EXPECT_EQ(JoinDifferences(diff), "v0: not on disk; v1: not on disk; v2: not on disk");
  for (int i = 3; i < 300; ++i) diff.push_back(absl::StrCat("v", i, ": not on disk"));
  EXPECT_EQ(JoinDifferences(diff),
            "v0: not on disk; v1: not on disk; v2: not on disk; v3: not on disk; v4: not on "
            "disk; v5: not on disk; v6: not on disk; v7: not on disk; and 292 more");
  EXPECT_EQ(JoinDifferences({}), "");
}

TEST(JobDescriptionTest, TheJobIsDescribedByFlagNameWithItsOptimizersSettings) {
  model::JobSpec job;
  job.optimizer.name = "adam";
  job.optimizer.learning_rate = 0.001f;
  job.batch_size = 64;
  const Json j = DescribeJob(job);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["optimizer"], "adam");
  EXPECT_EQ(j["learning_rate"].dump(), "0.001");
  EXPECT_EQ(j["beta2"].dump(), "0.999");
  EXPECT_EQ(j["epsilon"].dump(), "1e-07");
  EXPECT_EQ(FindMember(j, "momentum"), nullptr);  // not adam's
  EXPECT_EQ(j["consistency"], "async");
  EXPECT_EQ(j["wire_dtype"], "float32");
}

TEST(JobDescriptionTest, EachDifferingJobFlagIsNamedAndEachTasksOwnAreNot) {
  model::JobSpec chief;
  model::JobSpec worker = chief;
  EXPECT_THAT(JobDifferences(DescribeJob(chief), DescribeJob(worker)), IsEmpty());
  worker.batch_size = 128;
  worker.optimizer.learning_rate = 0.5f;
  worker.device = model::Device::Cpu();              // each task's own
  worker.shared_memory = false;       // each task's own
  worker.checkpoint_every_secs = 10;  // only the chief reads it
  EXPECT_THAT(JobDifferences(DescribeJob(chief), DescribeJob(worker)),
              ElementsAre("--batch_size=128 here, 32 on the chief",
                          "--learning_rate=0.5 here, 0.05 on the chief"));
  worker = chief;
  worker.optimizer.name = "momentum";
  EXPECT_THAT(JobDifferences(DescribeJob(chief), DescribeJob(worker)),
              ElementsAre("--momentum=0.9 here, (unset) on the chief",
                          "--nesterov=false here, (unset) on the chief",
                          "--optimizer=momentum here, sgd on the chief"));
}

}  // namespace
}  // namespace pstrain
