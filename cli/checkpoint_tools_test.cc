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
#include "data/tfds_writer.h"
#include "data/tfrecord.h"
#include "proto/example.pb.h"
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

// A run on a TensorFlow Datasets directory of JPEG photos, then `predict
// --images` on photo files: each file is read as the run's input reads its
// images, so a photo scores exactly as the same photo in the test split
// does, and the prediction is named by the dataset's class names.
TEST(CheckpointToolsTest, PredictScoresImageFilesAsTheRunsInputReadsThem) {
  const std::string dir = testing::FreshTempDir("predict_images");
  data::TfdsWriteOptions tfds;
  tfds.max_examples = 300;
  tfds.shards = 2;
  tfds.size = 20;
  tfds.spread = 6;
  ASSERT_OK_AND_ASSIGN(data::TfdsWritten written,
                       data::WriteIdxAsTfds("/usr/share/datasets/fashion-mnist", dir, tfds));
  const std::string config = dir + "/photos.pbtxt";
  ASSERT_OK(WriteFileAtomically(config, R"(
input {
  format: tfds
  train_split: "train[:250]"
  test_split: "train[250:]"
  feature { name: "image" decode: "jpeg" image_shape: [12, 12, 3] scale: 0.00392156862745098 }
}
input_shape: [12, 12, 3]
layer { flatten {} }
layer { name: "logits" dense { units: 10 } }
optimizer { name: "adam" learning_rate: 0.003 }
batch_size: 25
epochs: 1
)"));
  const std::string out = dir + "/out";
  CliArgs train = Args({"--model_config=" + config, "--data_dir=" + written.dir,
                        "--output_dir=" + out});
  ASSERT_OK_AND_ASSIGN(model::JobSpec job, JobSpecFromFlags(train));
  train::LocalOptions options;
  options.output_dir = out;
  options.run = RunInfo(train, TfConfig{});
  ASSERT_OK(train::RunLocal(job, options).status());

  // The first three photos of the test split, as files.
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> records,
                       data::ReadAllRecords(written.files[1], data::Compression::kNone));
  std::vector<std::string> files;
  for (int k = 0; k < 3; ++k) {
    v1::Example e;
    ASSERT_TRUE(e.ParseFromString(records[100 + k]));  // shard 1 starts at record 150
    files.push_back(absl::StrCat(dir, "/photo", k, ".jpg"));
    ASSERT_OK(WriteFileAtomically(files.back(),
                                  e.features().feature().at("image").bytes_list().value(0)));
  }
  Said split = RunCommand(PredictMain, {"predict", out, "--out=" + dir + "/split.jsonl"});
  ASSERT_EQ(split.code, 0) << split.err;
  Said photos = RunCommand(PredictMain, {"predict", out, "--out=" + dir + "/photos.csv",
                                         "--images=" + dir + "/photo*.jpg"});
  ASSERT_EQ(photos.code, 0) << photos.err;
  EXPECT_THAT(photos.out, HasSubstr("wrote 3 predictions of the checkpoint at step 10 to "));
  ASSERT_OK_AND_ASSIGN(std::string split_text, ReadFile(dir + "/split.jsonl"));
  ASSERT_OK_AND_ASSIGN(std::string photo_text, ReadFile(dir + "/photos.csv"));
  const std::vector<std::string> split_lines = absl::StrSplit(split_text, '\n');
  const std::vector<std::string> photo_lines = absl::StrSplit(photo_text, '\n');
  ASSERT_GE(photo_lines.size(), 4u);
  EXPECT_EQ(photo_lines[0], "file,predicted,class,p0,p1,p2,p3,p4,p5,p6,p7,p8,p9");
  const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  for (int k = 0; k < 3; ++k) {
    ASSERT_OK_AND_ASSIGN(Json want, ParseJson(split_lines[k]));
    std::vector<std::string> cells = absl::StrSplit(photo_lines[k + 1], ',');
    ASSERT_EQ(cells.size(), 13u) << photo_lines[k + 1];
    EXPECT_EQ(cells[0], files[k]);
    EXPECT_EQ(cells[1], absl::StrCat(want["predicted"].get<int64_t>()));
    EXPECT_EQ(cells[2], names[want["predicted"].get<int64_t>()]);
    for (int j = 0; j < 10; ++j) {
      EXPECT_EQ(cells[3 + j], absl::StrFormat("%.6g", want["probabilities"][j].get<double>()));
    }
  }
  Said bad = RunCommand(PredictMain, {"predict", out, "--out=" + dir + "/x.csv",
                                      "--images=" + config});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr(config + ": feature \"image\": not a JPEG image"));
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
