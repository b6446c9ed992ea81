#include "job/run_settings.h"

#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/json.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "job/job_flags.h"

namespace pstrain {
namespace {

constexpr char kConfig[] = R"(
input_dim: 784
layer { name: "dense_0" dense { units: 16 activation: relu } }
layer { name: "dense_1" dense { units: 10 } }
loss: softmax_cross_entropy
optimizer { name: "adam" learning_rate: 0.01 }
epochs: 3
)";

CliArgs Args(std::vector<const char*> flags) {
  flags.insert(flags.begin(), "pstrain");
  return *CliArgs::Parse(static_cast<int>(flags.size()), flags.data());
}

// A run.json as the chief writes it (job/run_info.h): every flag given to
// the chief, job flags and others, and the config's text.
std::string WriteRun(const std::string& name, const Json& run) {
  const std::string dir = testing::FreshTempDir(name);
  EXPECT_OK(WriteFileAtomically(dir + "/run.json", run.dump()));
  return dir;
}

TEST(RunSettingsTest, TheRunsJobFlagsAndConfigTextAreRead) {
  const std::string dir =
      WriteRun("read", {{"flags",
                         {"--model_config=gone/cnn.pbtxt", "--batch_size=64", "--log_dir=/logs",
                          "--output_dir=/out", "--ps_wait_s=30"}},
                        {"model_config", kConfig},
                        {"model_config_file", "gone/cnn.pbtxt"}});
  ASSERT_OK_AND_ASSIGN(std::optional<RunSettings> run, ReadRunSettings(dir));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->path, dir + "/run.json");
  // Only the job's flags: not where a task logs or how long it waits.
  EXPECT_EQ(run->flags, (std::vector<std::string>{"--model_config=gone/cnn.pbtxt",
                                                  "--batch_size=64", "--output_dir=/out"}));
  EXPECT_EQ(run->model_config, kConfig);
  EXPECT_EQ(run->model_config_file, "gone/cnn.pbtxt");
}

TEST(RunSettingsTest, NoRunJsonOrNoFlagsIsNoneAndGarbageIsNamed) {
  EXPECT_EQ(*ReadRunSettings(testing::FreshTempDir("none")), std::nullopt);
  // A launch that failed before it began records no flags.
  EXPECT_EQ(*ReadRunSettings(WriteRun("noflags", {{"outcome", "bad"}})), std::nullopt);
  const std::string bad = testing::FreshTempDir("garbage");
  ASSERT_OK(WriteFileAtomically(bad + "/run.json", "{\"flags\": ["));
  absl::StatusOr<std::optional<RunSettings>> garbage = ReadRunSettings(bad);
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(garbage.status().message().find(bad + "/run.json does not parse"), std::string::npos);
}

TEST(RunSettingsTest, TheRunsConfigTextGivesTheModelAfterItsFileIsGone) {
  const RunSettings run{
      "out/run.json",
      {"--model_config=gone/cnn.pbtxt", "--batch_size=64", "--device=cuda", "--output_dir=/out"},
      kConfig,
      "gone/cnn.pbtxt"};
  CliArgs args = Args({"--data_dir=/data"});
  const TakenSettings taken = TakeRunSettings(run, {"device", "output_dir"}, true, args);
  EXPECT_EQ(taken.taken, (std::vector<std::string>{"--batch_size=64"}));
  EXPECT_EQ(taken.config_text, kConfig);
  EXPECT_TRUE(taken.differ.empty());
  EXPECT_FALSE(args.Has("device"));
  EXPECT_FALSE(args.Has("output_dir"));
  EXPECT_FALSE(args.Has("model_config"));
  const ConfigText text{taken.config_text, "gone/cnn.pbtxt (as out/run.json records it)"};
  ASSERT_OK_AND_ASSIGN(model::JobSpec job, JobSpecFromFlags(args, &text));
  EXPECT_EQ(job.optimizer.name, "adam");
  EXPECT_EQ(job.epochs, 3);
  EXPECT_EQ(job.batch_size, 64);
  EXPECT_EQ(job.data_dir, "/data");
  ASSERT_EQ(job.model.layers.size(), 2u);
  EXPECT_EQ(DescribeTaken(run, taken),
            "the run's settings (out/run.json): --model_config=gone/cnn.pbtxt (its text as "
            "run.json records it), --batch_size=64");
  // Without asking for the text, the run's flag is taken as it was.
  CliArgs as_flag = Args({});
  const TakenSettings by_path = TakeRunSettings(run, {"output_dir"}, false, as_flag);
  EXPECT_EQ(by_path.taken, (std::vector<std::string>{"--model_config=gone/cnn.pbtxt",
                                                     "--batch_size=64", "--device=cuda"}));
  EXPECT_EQ(*as_flag.GetString("model_config", ""), "gone/cnn.pbtxt");
}

TEST(RunSettingsTest, FlagsGivenOverrideAndEachDifferenceIsNamed) {
  const RunSettings run{
      "out/run.json", {"--hidden=64", "--epochs=2", "--learning_rate=0.1", "--epochs=4"}, "", ""};
  CliArgs args = Args({"--epochs=3", "--learning_rate=0.1"});
  const TakenSettings taken = TakeRunSettings(run, {}, true, args);
  EXPECT_EQ(taken.taken, (std::vector<std::string>{"--hidden=64"}));
  // The run's last --epochs is the one it ran with.
  EXPECT_EQ(taken.differ, (std::vector<std::string>{"--epochs=3 (the run had --epochs=4)"}));
  EXPECT_EQ(*args.GetInt("epochs", 0), 3);
  EXPECT_EQ(DescribeTaken(run, taken),
            "the run's settings (out/run.json): --hidden=64; flags that differ from the run's: "
            "--epochs=3 (the run had --epochs=4)");
  // Nothing taken: the differences name the file themselves.
  const RunSettings same_epochs{"out/run.json", {"--epochs=4"}, "", ""};
  CliArgs three = Args({"--epochs=3"});
  EXPECT_EQ(DescribeTaken(same_epochs, TakeRunSettings(same_epochs, {}, true, three)),
            "flags that differ from the run's (out/run.json): --epochs=3 (the run had --epochs=4)");
}

TEST(RunSettingsTest, LayersOfTheCommandsOwnReplaceAllOfTheRunsAndAreNamed) {
  const std::string dir = testing::FreshTempDir("layers");
  ASSERT_OK(WriteFileAtomically(dir + "/same.pbtxt", kConfig));
  ASSERT_OK(WriteFileAtomically(dir + "/other.pbtxt", std::string(kConfig) + "seed: 7\n"));
  const RunSettings run{
      "out/run.json", {"--model_config=" + dir + "/same.pbtxt"}, kConfig, dir + "/same.pbtxt"};
  // The same text under another name: nothing differs.
  const std::string same_flag = "--config=" + dir + "/same.pbtxt";
  CliArgs same = Args({same_flag.c_str()});
  TakenSettings taken = TakeRunSettings(run, {}, true, same);
  EXPECT_TRUE(taken.taken.empty());
  EXPECT_TRUE(taken.config_text.empty());
  EXPECT_TRUE(taken.differ.empty());
  EXPECT_FALSE(same.Has("model_config"));
  // Another text, and a --hidden in place of the config.
  const std::string other_flag = "--model_config=" + dir + "/other.pbtxt";
  CliArgs other = Args({other_flag.c_str()});
  EXPECT_EQ(TakeRunSettings(run, {}, true, other).differ,
            (std::vector<std::string>{other_flag + " (the run had --model_config=" + dir +
                                      "/same.pbtxt)"}));
  CliArgs hidden = Args({"--hidden=8"});
  taken = TakeRunSettings(run, {}, true, hidden);
  EXPECT_TRUE(taken.config_text.empty());
  EXPECT_EQ(
      taken.differ,
      (std::vector<std::string>{"--hidden=8 (the run had --model_config=" + dir + "/same.pbtxt)"}));
  // The run's file edited since: named as such.
  ASSERT_OK(WriteFileAtomically(dir + "/same.pbtxt", std::string(kConfig) + "seed: 9\n"));
  const std::string edited_flag = "--model_config=" + dir + "/same.pbtxt";
  CliArgs edited = Args({edited_flag.c_str()});
  EXPECT_EQ(
      TakeRunSettings(run, {}, true, edited).differ,
      (std::vector<std::string>{
          edited_flag + " (the file has changed since the run; run.json holds the text the run had)"}));
}

}  // namespace
}  // namespace pstrain
