// Fashion-MNIST read from TFRecord files of tf.train.Example trains exactly
// as from its IDX files: `pstrain data to-tfrecord`'s conversion of the real
// files (/usr/share/datasets/fashion-mnist), read through
// configs/fashion_mnist_tfrecord.pbtxt's feature spec, gives a local run
// of the default model the same parameters, loss and accuracy, bit for bit,
// as the IDX files with the same seed; GZIP and plain files alike, one file
// or several. Streamed through a shuffle buffer instead of loaded, the
// same files train as well: two epochs of the same steps reach the test
// accuracy one epoch in memory does. Images stored as PNG
// (configs/fashion_mnist_png.pbtxt) or raw bytes train bit for bit the same.
#include <string>
#include <tuple>

#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/convert.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

TEST(TfRecordMatchesIdxTest, LocalTrainingFromTfRecordsEqualsTrainingFromIdx) {
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_tfrecord.pbtxt"));
  model::JobSpec from_idx;  // the default job: the IDX files
  from_idx.epochs = 1;
  from_idx.seed = 3;
  from_idx.device = model::Device::Cpu();
  ASSERT_OK_AND_ASSIGN(train::LocalResult want, train::RunLocal(from_idx, 100000));
  EXPECT_GT(want.test_accuracy, 0.80);

  // `job` (a TFRecord input) read from `dir` trains as from_idx did.
  auto expect_as_idx = [&](model::JobSpec job, const std::string& dir, const std::string& what) {
    job.data_dir = dir;
    job.epochs = 1;
    job.seed = 3;
    job.device = model::Device::Cpu();
    absl::StatusOr<train::LocalResult> got = train::RunLocal(job, 100000);
    ASSERT_OK(got.status());
    EXPECT_EQ(got->steps, want.steps);
    EXPECT_EQ(got->params, want.params) << what;
    EXPECT_EQ(got->test_loss, want.test_loss);
    EXPECT_EQ(got->test_accuracy, want.test_accuracy);
  };
  for (const auto& [files, compression] :
       {std::tuple{1, data::Compression::kGzip}, std::tuple{3, data::Compression::kNone}}) {
    const std::string dir = testing::TempDir() + "/fashion-" + std::to_string(files);
    ASSERT_OK(data::WriteIdxAsTfRecord(from_idx.data_dir, dir, files, compression).status());
    expect_as_idx(config.job, dir, std::to_string(files) + " files");
  }

  // Images stored as bytes: PNG (TensorFlow Datasets' layout, through
  // configs/fashion_mnist_png.pbtxt) and raw (TensorFlow's MNIST
  // convert_to_records layout) decode to the same floats.
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile png_config,
                       model::LoadModelConfigFile("configs/fashion_mnist_png.pbtxt"));
  for (data::ImageEncoding encoding : {data::ImageEncoding::kPng, data::ImageEncoding::kRaw}) {
    const bool png = encoding == data::ImageEncoding::kPng;
    const std::string dir = testing::TempDir() + (png ? "/fashion-png" : "/fashion-raw");
    ASSERT_OK(data::WriteIdxAsTfRecord(from_idx.data_dir, dir, png ? 2 : 1,
                                       data::Compression::kGzip, encoding)
                  .status());
    model::JobSpec from_bytes = png_config.job;
    if (!png) {
      data::FeatureDef& image = from_bytes.input.features.features[0];
      image.name = "image_raw";
      image.decode = data::FeatureDecode::kRawUint8;
    }
    expect_as_idx(from_bytes, dir, png ? "png" : "raw");
  }

  model::JobSpec streamed = config.job;
  streamed.data_dir = testing::TempDir() + "/fashion-3";
  streamed.input.shuffle_buffer = 10000;
  streamed.epochs = 2;
  streamed.seed = 3;
  streamed.device = model::Device::Cpu();
  ASSERT_OK_AND_ASSIGN(train::LocalResult got, train::RunLocal(streamed, 100000));
  EXPECT_EQ(got.steps, 2 * want.steps);
  EXPECT_GE(got.test_accuracy, want.test_accuracy)
      << got.test_accuracy << " streamed, 2 epochs; " << want.test_accuracy
      << " in memory, 1 epoch";
}

}  // namespace
}  // namespace pstrain
