#include "cli/job_flags.h"

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

CliArgs Args(std::vector<const char*> argv) {
  argv.insert(argv.begin(), "prog");
  auto a = CliArgs::Parse(argv.size(), argv.data());
  EXPECT_OK(a);
  return *a;
}

TEST(JobFlagsTest, DefaultsAndOverrides) {
  CliArgs none = Args({});
  ASSERT_OK_AND_ASSIGN(model::JobSpec d, JobSpecFromFlags(none));
  EXPECT_EQ(d.batch_size, 32);
  EXPECT_EQ(d.model.hidden, std::vector<int>{128});
  CliArgs some = Args({"--hidden=256,64", "--epochs=3", "--learning_rate=0.1", "--seed=9"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec j, JobSpecFromFlags(some));
  EXPECT_EQ(j.model.hidden, (std::vector<int>{256, 64}));
  EXPECT_EQ(j.epochs, 3);
  EXPECT_FLOAT_EQ(j.optimizer.learning_rate, 0.1f);
  EXPECT_EQ(j.optimizer.name, "sgd");
  CliArgs adam = Args({"--optimizer=adam", "--learning_rate=0.001", "--beta2=0.99"});
  ASSERT_OK_AND_ASSIGN(model::JobSpec a, JobSpecFromFlags(adam));
  EXPECT_EQ(a.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(a.optimizer.beta2, 0.99f);
  CliArgs bad = Args({"--optimizer=rmsprop"});
  EXPECT_EQ(JobSpecFromFlags(bad).status().message(),
            "--optimizer=rmsprop: must be sgd, momentum, adagrad or adam");
  EXPECT_EQ(j.seed, 9u);
  CliArgs softmax = Args({"--hidden="});
  ASSERT_OK_AND_ASSIGN(model::JobSpec s, JobSpecFromFlags(softmax));
  EXPECT_TRUE(s.model.hidden.empty());
}

TEST(JobFlagsTest, BadValuesNameTheFlag) {
  CliArgs a = Args({"--hidden=128,x"});
  EXPECT_EQ(JobSpecFromFlags(a).status().message(),
            "--hidden=128,x: \"x\" is not a layer width in 1..65536");
  CliArgs b = Args({"--batch_size=0"});
  EXPECT_EQ(JobSpecFromFlags(b).status().message(), "--batch_size=0: must be in 1..65536");
  CliArgs c = Args({"--learning_rate=-1"});
  EXPECT_EQ(JobSpecFromFlags(c).status().message(), "--learning_rate=-1: must be in (0, 100]");
}

TEST(JobFlagsTest, OutputDirDependsOnEnvironment) {
  CliArgs a = Args({});
  EXPECT_EQ(*OutputDirFromFlags(a, "cloud"), "/data/output");
  EXPECT_EQ(*OutputDirFromFlags(a, ""), "./output");
  CliArgs b = Args({"--output_dir=/tmp/x"});
  EXPECT_EQ(*OutputDirFromFlags(b, "cloud"), "/tmp/x");
}

}  // namespace
}  // namespace pstrain
