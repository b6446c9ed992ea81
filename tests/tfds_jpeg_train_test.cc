// The seed's input, end to end in one process: a TensorFlow Datasets
// directory of JPEG photos of varying size (`pstrain data to-tfds`'s
// stand-in for cats_vs_dogs, from the real Fashion-MNIST files), its train
// split sliced as the seed's users slice it, decoded, resized to 32x32x3
// and scaled, trains Keras's MobileNetV2 (alpha 0.35) through
// configs/fashion_mnist_tfds.pbtxt, in memory and streamed through a
// shuffle buffer; and the 28x28 grey JPEGs of
// `to-tfrecord --image_encoding=jpeg` through configs/fashion_mnist_jpeg.pbtxt.
#include <string>

#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/convert.h"
#include "data/tfds_writer.h"
#include "gtest/gtest.h"
#include "model/compute_threads.h"
#include "model/model_config.h"
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

}  // namespace
}  // namespace pstrain
