// The seed's input, end to end in one process: a TensorFlow Datasets
// directory of JPEG photos of varying size (`pstrain data to-tfds`'s
// stand-in for cats_vs_dogs, from the real Fashion-MNIST files), its train
// split sliced as the seed's users slice it, decoded, resized to 32x32x3
// and scaled, trains Keras's MobileNetV2 (alpha 0.35) through
// configs/fashion_mnist_tfds.pbtxt, in memory and streamed through a
// shuffle buffer; the 28x28 grey JPEGs of `to-tfrecord
// --image_encoding=jpeg` through configs/fashion_mnist_jpeg.pbtxt; and the
// photos in a sync PS job and a ring all-reduce job, as `pstrain launch`
// starts them.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/convert.h"
#include "data/tfds_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/compute_threads.h"
#include "model/model_config.h"
#include "tests/testing/task_set.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// One compute thread, as a training task has by default: the test command
// runs tests side by side on two cores, where oneDNN's OpenMP threads
// spinning at their barriers against each other's run many times slower
// (this test: 9 s alone, past 250 s beside the cluster tests).
class TfdsJpegTrainTest : public ::testing::Test {
 protected:
  void SetUp() override { model::SetComputeThreads(1); }
};

TEST_F(TfdsJpegTrainTest, MobileNetV2TrainsOnASlicedTfdsSplitOfJpegPhotos) {
  data::TfdsWriteOptions options;
  options.max_examples = 13000;
  const std::string root = testing::TempDir() + "/tfds";
  ASSERT_OK_AND_ASSIGN(data::TfdsWritten written,
                       data::WriteIdxAsTfds(kFashionMnist, root, options));
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_tfds.pbtxt"));
  model::JobSpec job = config.job;
  EXPECT_EQ(job.input.train_split, "train[:80%]");
  job.data_dir = written.dir;
  job.input.train_split = "train[:12000]";
  job.input.test_split = "train[-1000:]";
  job.device = model::Device::Cpu();
  ASSERT_OK_AND_ASSIGN(train::LocalResult got, train::RunLocal(job, 100000));
  EXPECT_EQ(got.steps, 12000 / 64);
  // Ten classes: chance is 0.1.
  EXPECT_GT(got.test_accuracy, 0.45) << got.test_accuracy;

  // Streamed: each record decoded as it enters the shuffle buffer.
  job.input.shuffle_buffer = 1024;
  ASSERT_OK_AND_ASSIGN(train::LocalResult streamed, train::RunLocal(job, 100000));
  EXPECT_EQ(streamed.steps, 12000 / 64);
  EXPECT_GT(streamed.test_accuracy, 0.45) << streamed.test_accuracy;
}

TEST_F(TfdsJpegTrainTest, GreyJpegsResizedToMobileNetsInputTrain) {
  const std::string dir = testing::TempDir() + "/fashion-jpeg";
  ASSERT_OK(data::WriteIdxAsTfRecord(kFashionMnist, dir, 2, data::Compression::kNone,
                                     data::ImageEncoding::kJpeg)
                .status());
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_jpeg.pbtxt"));
  model::JobSpec job = config.job;
  job.data_dir = dir;
  job.max_steps = 200;
  job.device = model::Device::Cpu();
  ASSERT_OK_AND_ASSIGN(train::LocalResult got, train::RunLocal(job, 2000));
  EXPECT_EQ(got.steps, 200);
  EXPECT_GT(got.test_accuracy, 0.45) << got.test_accuracy;
}

// The seed's other strategies on the same photos, as `pstrain launch` runs
// them on one host, each with an evaluator: a sync PS job (a ps, the chief
// and a worker training) and a ring without ps (MultiWorkerMirroredStrategy's
// cluster). Every task ends 0, the global step is the schedule's, and the
// evaluator scores the final checkpoint.
TEST_F(TfdsJpegTrainTest, ThePsAndRingJobsTrainOnItAsLaunchRunsThem) {
  // Four shards of 4,000 photos; the training split two whole ones, one
  // for each replica (sharded by file, as tf.data's auto-sharding does).
  data::TfdsWriteOptions options;
  options.max_examples = 16000;
  const std::string root = testing::TempDir() + "/tfds-launch";
  ASSERT_OK_AND_ASSIGN(data::TfdsWritten written,
                       data::WriteIdxAsTfds(kFashionMnist, root, options));
  for (const bool ring : {false, true}) {
    const std::string out = testing::TempDir() + (ring ? "/launch-ring" : "/launch-ps");
    SpawnOptions o;
    o.argv = {absl::StrCat(std::getenv("TEST_SRCDIR"), "/pstrain/pstrain"),
              "launch",
              "--ps",
              ring ? "0" : "1",
              "--workers",
              "1",
              "--evaluator",
              "--config=configs/fashion_mnist_tfds.pbtxt",
              "--data_dir=" + written.dir,
              "--train_split=train[:50%]",
              "--test_split=train[12000:13000]",
              "--output_dir=" + out};
    if (!ring) o.argv.push_back("--consistency=sync");
    o.log_path = out + ".log";
    testing::TaskSet tasks;
    ASSERT_OK(tasks.Start("launch", o));
    const std::map<std::string, int> codes = tasks.WaitAll(absl::Seconds(240));
    const std::string log = ReadFile(o.log_path).value_or("");
    ASSERT_EQ(codes.at("launch"), 0) << log;
    EXPECT_THAT(log, ::testing::HasSubstr("evaluator: eval at step 62: "));
    ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(out + "/final_metrics.json"));
    ASSERT_OK_AND_ASSIGN(Json metrics, ParseJson(text));
    // Two replicas of 4,000 photos: 62 steps of 64 each, one global step
    // per step taken together.
    EXPECT_EQ(FindMember(metrics, "global_step")->get<double>(), 62) << text;
    EXPECT_EQ(FindMember(metrics, "test_examples")->get<double>(), 1000) << text;
    // Ten classes: chance is 0.1, give or take 0.01 on 1,000 photos; 62
    // steps of MobileNetV2 from scratch reach about 0.25 here.
    const double accuracy = FindMember(metrics, "test_accuracy")->get<double>();
    std::printf("%s: test accuracy %.4f\n", ring ? "ring" : "sync ps", accuracy);
    EXPECT_GT(accuracy, 0.15) << text;
  }
}

}  // namespace
}  // namespace pstrain
