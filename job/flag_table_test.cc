// The one table of flags: each defined once with a default that agrees with
// the code's, a range its default lies in, and the reference page
// docs/flags.md generated from it, kept current.
#include "job/flag_table.h"

#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/task_flags.h"
#include "model/job_spec.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TEST(FlagTableTest, EachFlagIsDefinedOnceWithADefaultInItsRange) {
  std::set<std::string> names;
  for (const FlagDef& f : FlagTable()) {
    EXPECT_TRUE(names.insert(f.name).second) << "--" << f.name << " is defined twice";
    EXPECT_NE(*f.help, '\0') << f.name;
    int64_t v = 0;
    if ((f.lo.has_value() || f.hi.has_value()) && absl::SimpleAtoi(f.default_value, &v)) {
      if (f.lo.has_value()) EXPECT_GE(v, *f.lo) << f.name;
      if (f.hi.has_value()) EXPECT_LE(v, *f.hi) << f.name;
    }
  }
  // Every task accepts exactly the table's flags.
  EXPECT_EQ(std::set<std::string>(TaskFlagNames().begin(), TaskFlagNames().end()), names);
}

TEST(FlagTableTest, TheJobFlagsDefaultsAreTheJobSpecsOwn) {
  const model::JobSpec job;
  auto def = [](const char* name) { return std::string(FindFlag(name)->default_value); };
  EXPECT_EQ(def("batch_size"), absl::StrCat(job.batch_size));
  EXPECT_EQ(def("epochs"), absl::StrCat(job.epochs));
  EXPECT_EQ(def("max_steps"), absl::StrCat(job.max_steps));
  EXPECT_EQ(def("optimizer"), job.optimizer.name);
  EXPECT_EQ(def("learning_rate"), absl::StrCat(job.optimizer.learning_rate));
  EXPECT_EQ(def("momentum"), absl::StrCat(job.optimizer.momentum));
  EXPECT_EQ(def("beta1"), absl::StrCat(job.optimizer.beta1));
  EXPECT_EQ(def("beta2"), absl::StrCat(job.optimizer.beta2));
  EXPECT_EQ(def("epsilon"), absl::StrCat(job.optimizer.epsilon));
  EXPECT_EQ(def("initial_accumulator"), absl::StrCat(job.optimizer.initial_accumulator));
  EXPECT_EQ(def("seed"), absl::StrCat(job.seed));
  EXPECT_EQ(def("consistency"), job.consistency.ToString());
  EXPECT_EQ(def("replicas_to_aggregate"), absl::StrCat(job.replicas_to_aggregate));
  EXPECT_EQ(def("sync_wait_secs"), absl::StrCat(job.sync_wait_secs));
  EXPECT_EQ(def("device"), job.device.ToString());
  EXPECT_EQ(def("data_dir"), job.data_dir);
  EXPECT_EQ(def("checkpoint_secs"), absl::StrCat(job.checkpoint_every_secs));
  EXPECT_EQ(def("checkpoint_steps"), absl::StrCat(job.checkpoint_every_steps));
  EXPECT_EQ(def("keep_checkpoints"), absl::StrCat(job.keep_checkpoints));
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  EXPECT_EQ(def("push_per_layer"), flag(job.push_per_layer));
  EXPECT_EQ(def("shared_memory"), flag(job.shared_memory));
  EXPECT_EQ(def("tcp_frames"), flag(job.tcp_frames));
  EXPECT_EQ(def("chief_trains"), flag(job.chief_trains));
  EXPECT_EQ(def("nesterov"), flag(job.optimizer.nesterov));
}

// Arguments as a task's command line gives them.
CliArgs Args(std::vector<const char*> argv) {
  argv.insert(argv.begin(), "pstrain");
  auto args = CliArgs::Parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_OK(args);
  return *std::move(args);
}

TEST(FlagTableTest, ReadersTakeTheTablesDefaultAndRange) {
  CliArgs none = Args({});
  ASSERT_OK_AND_ASSIGN(int64_t wait, IntFlag(none, "ps_wait_s"));
  EXPECT_EQ(wait, 120);
  ASSERT_OK_AND_ASSIGN(int64_t fallback, IntFlag(none, "batch_size", 64));
  EXPECT_EQ(fallback, 64);
  CliArgs bad = Args({"--stop_grace_secs=4000"});
  EXPECT_EQ(IntFlag(bad, "stop_grace_secs").status().message(),
            "--stop_grace_secs=4000: must be in 0..3600");
  CliArgs log = Args({"--log_to=stdout"});
  ASSERT_OK_AND_ASSIGN(std::string to, StringFlag(log, "log_to"));
  EXPECT_EQ(to, "stdout");
  ASSERT_OK_AND_ASSIGN(bool once, BoolFlag(none, "once"));
  EXPECT_FALSE(once);
}

TEST(FlagTableTest, TheUsageTextListsEveryFlagOfItsGroup) {
  const std::string usage = FlagUsage(FlagGroup::kPs);
  EXPECT_THAT(usage, HasSubstr("--stop_grace_secs=S (10)"));
  EXPECT_THAT(usage, HasSubstr("[0..3600]"));
  EXPECT_THAT(FlagUsage(FlagGroup::kEvaluator), HasSubstr("--[no]once (false)"));
}

TEST(FlagTableTest, TheReferencePageIsCurrent) {
  const std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/docs/flags.md");
  ASSERT_OK_AND_ASSIGN(std::string page, ReadFile(path));
  EXPECT_EQ(page, FlagReference())
      << "docs/flags.md is out of date: regenerate it with `pstrain help flags > docs/flags.md`";
}

}  // namespace
}  // namespace pstrain
