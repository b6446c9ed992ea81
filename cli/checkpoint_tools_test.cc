#include "cli/checkpoint_tools.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "cluster/tf_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// A user's own model: not the default MLP, with settings of its own.
constexpr char kConfig[] = R"(
input_dim: 784
layer { name: "hidden" dense { units: 24 activation: relu } }
layer { name: "logits" dense { units: 10 } }
loss: softmax_cross_entropy
optimizer { name: "adam" learning_rate: 0.004 }
batch_size: 50
epochs: 1
seed: 5
)";

CliArgs Args(std::vector<std::string> words) {
  words.insert(words.begin(), "pstrain");
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  return *CliArgs::Parse(static_cast<int>(argv.size()), argv.data());
}

struct Said {
  int code;
  std::string out, err;
};

// One command as `pstrain CMD ...` runs it: its exit code, stdout, stderr.
Said RunCommand(int (*command)(CliArgs&), std::vector<std::string> words) {
  CliArgs args = Args(std::move(words));
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = command(args);
  std::string out = ::testing::internal::GetCapturedStdout();
  return {code, out, ::testing::internal::GetCapturedStderr()};
}

// A run of kConfig as `pstrain train --local --model_config=DIR/my_model.pbtxt
// --max_steps=STEPS --output_dir=DIR/out` trains it.
struct OwnRun {
  std::string config, out;
  model::JobSpec job;
  train::LocalOptions options;
  train::LocalResult result;  // of the run
};
OwnRun TrainOwnConfig(const std::string& dir, int64_t steps) {
  OwnRun run{dir + "/my_model.pbtxt", dir + "/out", {}, {}, {}};
  EXPECT_OK(WriteFileAtomically(run.config, kConfig));
  CliArgs train = Args({"--model_config=" + run.config, absl::StrCat("--max_steps=", steps),
                        "--output_dir=" + run.out});
  run.job = JobSpecFromFlags(train).value();
  run.options.output_dir = run.out;
  run.options.run = RunInfo(train, TfConfig{});
  absl::StatusOr<train::LocalResult> trained = train::RunLocal(run.job, run.options);
  EXPECT_TRUE(trained.ok()) << trained.status();
  if (trained.ok()) {
    EXPECT_EQ(trained->steps, steps);
    run.result = *std::move(trained);
  }
  return run;
}

// A run trained with --model_config, whose config file is then gone:
// evaluate, predict, export and inspect take the model and the job from its
// run.json, without the run's flags.
TEST(CheckpointToolsTest, ARunOfItsOwnConfigIsUsedWithoutItsFlags) {
  const std::string dir = testing::FreshTempDir("own_config");
  const OwnRun run = TrainOwnConfig(dir, 60);
  const std::string& config = run.config;
  const std::string& out = run.out;
  const train::LocalResult& trained = run.result;
  std::filesystem::remove(config);

  const std::string taken = absl::StrFormat(
      "pstrain evaluate: the run's settings (%s/run.json): --model_config=%s (its "
      "text as run.json records it), --max_steps=60\n",
      out, config);
  Said evaluate = RunCommand(EvaluateMain, {"evaluate", out});
  ASSERT_EQ(evaluate.code, 0) << evaluate.err;
  EXPECT_EQ(evaluate.out, absl::StrFormat("checkpoint at step 60 (%s/ckpt-60): loss %.4f - "
                                          "accuracy %.4f on 10000 test examples\n",
                                          out, trained.test_loss, trained.test_accuracy));
  EXPECT_THAT(evaluate.err, HasSubstr(taken));

  Said predict = RunCommand(PredictMain, {"predict", out, "--out=" + dir + "/p.jsonl"});
  ASSERT_EQ(predict.code, 0) << predict.err;
  EXPECT_THAT(predict.out, HasSubstr(absl::StrFormat("(accuracy %.4f against their labels)",
                                                     trained.test_accuracy)));
  ASSERT_OK_AND_ASSIGN(std::string lines, ReadFile(dir + "/p.jsonl"));
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines, '\n', absl::SkipEmpty())).size(),
            10000u);

  Said exported = RunCommand(ExportMain, {"export", out, "--out=" + dir + "/m.npz"});
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_THAT(exported.out,
              HasSubstr("wrote 4 arrays (19090 floats) of the checkpoint at step 60 to "));
  EXPECT_TRUE(std::filesystem::exists(dir + "/m.npz"));

  Said inspect = RunCommand(InspectMain, {"inspect", out});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_THAT(inspect.out,
              HasSubstr(absl::StrFormat("trained by the run of %s/run.json with --model_config=%s "
                                        "--max_steps=60 --output_dir=%s (the config's text "
                                        "recorded there)\n",
                                        out, config, out)));

  // A flag given overrides the run's and is named; one that changes the
  // model is refused, saying so.
  Said steps = RunCommand(EvaluateMain, {"evaluate", out, "--max_steps=7"});
  EXPECT_EQ(steps.code, 0) << steps.err;
  EXPECT_THAT(steps.err, HasSubstr("flags that differ from the run's: --max_steps=7 (the run had "
                                   "--max_steps=60)"));
  Said other = RunCommand(EvaluateMain, {"evaluate", out, "--hidden=8"});
  EXPECT_EQ(other.code, 2);
  EXPECT_THAT(other.err, HasSubstr("--hidden=8 (the run had --model_config=" + config + ")"));
  EXPECT_THAT(other.err, HasSubstr("the checkpoint is of another model (" + out + "/run.json)"));
  EXPECT_THAT(other.err, HasSubstr("Leave out the flags that change the model"));
}

// A relaunch onto a run of another model is refused with nothing in the
// output directory changed: run.json, the checkpoints and the lock file's
// holder line (which only an accepted launch rewrites) stay as they were.
TEST(CheckpointToolsTest, ARefusedRelaunchLeavesEveryFileAsItWas) {
  const std::string dir = testing::FreshTempDir("refused_relaunch");
  OwnRun run = TrainOwnConfig(dir, 20);
  const std::string& out = run.out;
  // The first run's holder line, as another process on another host wrote it.
  const std::string holder = "pid 4242 on host trainer-0 since 2026-12-01 10:00:00 UTC, chief\n";
  ASSERT_OK(WriteFileAtomically(out + "/LOCK", holder));
  // Each file's text, or for a long one its length and hash, so that a
  // failure names the file that changed without printing checkpoints.
  auto snapshot = [&out] {
    std::map<std::string, std::string> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(out)) {
      if (!e.is_regular_file()) continue;
      const std::string text = ReadFile(e.path().string()).value_or("?");
      files[std::filesystem::relative(e.path(), out).string()] =
          text.size() <= 200 ? text
                             : absl::StrCat(text.size(), " bytes, hash ",
                                            std::hash<std::string>{}(text));
    }
    return files;
  };
  const std::map<std::string, std::string> before = snapshot();
  ASSERT_EQ(before.at("LOCK"), holder);

  ASSERT_OK(
      WriteFileAtomically(run.config, absl::StrReplaceAll(kConfig, {{"units: 24", "units: 32"}})));
  CliArgs other_args = Args({"--model_config=" + run.config, "--output_dir=" + out});
  ASSERT_OK_AND_ASSIGN(model::JobSpec other, JobSpecFromFlags(other_args));
  absl::StatusOr<train::LocalResult> refused = train::RunLocal(other, run.options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("holds a run of another model"));
  EXPECT_THAT(refused.status().message(), HasSubstr("Nothing was changed."));
  EXPECT_EQ(snapshot(), before);

  // The same model again is accepted, and the lock names its new holder.
  ASSERT_OK(WriteFileAtomically(run.config, kConfig));
  run.job.max_steps = 30;
  ASSERT_OK(train::RunLocal(run.job, run.options).status());
  ASSERT_OK_AND_ASSIGN(const std::string lock, ReadFile(out + "/LOCK"));
  EXPECT_THAT(lock, HasSubstr(absl::StrCat("pid ", ::getpid(), " on host ")));
  EXPECT_THAT(lock, HasSubstr(" UTC, train --local\n"));
}

}  // namespace
}  // namespace pstrain
