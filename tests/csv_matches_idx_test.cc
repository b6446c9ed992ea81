// Fashion-MNIST read from CSV trains exactly as from its IDX files, and so
// does the TFRecord conversion of that CSV: the first 12,000 training and
// 2,000 test images of the real files (/usr/share/datasets/fashion-mnist)
// as IDX files, as `pstrain data to-csv` writes them (Kaggle's layout,
// pixels 0..255) read through configs/fashion_mnist_csv.pbtxt (scale
// 1/255), and as `pstrain data csv-to-tfrecord` converts that CSV: a local
// run of the default model on each gives the same parameters, loss and
// accuracy, bit for bit, with the same seed.
#include <cmath>
#include <string>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/convert.h"
#include "data/dataset.h"
#include "data/idx_reader.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "train/local_trainer.h"

namespace pstrain {
namespace {

// The first `n` examples of a split of `from` as IDX files in `to`.
absl::Status WriteIdxPrefix(const std::string& from, const std::string& to, data::Split split,
                            int64_t n) {
  absl::StatusOr<data::Dataset> ds = data::LoadMnistFormat(from, split);
  if (!ds.ok()) return ds.status();
  data::IdxArray images, labels;
  images.dims = {n, 28, 28};
  labels.dims = {n};
  for (int64_t i = 0; i < n * 784; ++i) {
    images.values.push_back(static_cast<uint8_t>(std::lround(ds->features[i] * 255.0f)));
  }
  for (int64_t i = 0; i < n; ++i) labels.values.push_back(static_cast<uint8_t>(ds->labels[i]));
  const std::string prefix = to + (split == data::Split::kTrain ? "/train" : "/t10k");
  if (absl::Status s = data::WriteIdxFile(prefix + "-images-idx3-ubyte", images); !s.ok()) return s;
  return data::WriteIdxFile(prefix + "-labels-idx1-ubyte", labels);
}

model::JobSpec Job(model::JobSpec job, const std::string& data_dir) {
  job.data_dir = data_dir;
  job.epochs = 3;
  job.seed = 3;
  job.device = model::Device::Cpu();
  return job;
}

TEST(CsvMatchesIdxTest, LocalTrainingFromCsvEqualsTrainingFromIdx) {
  const std::string idx = testing::TempDir() + "/idx";
  ASSERT_OK(MakeDirs(idx));
  const std::string fashion = model::JobSpec().data_dir;
  ASSERT_OK(WriteIdxPrefix(fashion, idx, data::Split::kTrain, 12000));
  ASSERT_OK(WriteIdxPrefix(fashion, idx, data::Split::kTest, 2000));
  ASSERT_OK_AND_ASSIGN(train::LocalResult want,
                       train::RunLocal(Job(model::JobSpec(), idx), 100000));
  EXPECT_GT(want.test_accuracy, 0.76) << want.test_accuracy;

  const std::string csv = testing::TempDir() + "/csv";
  ASSERT_OK_AND_ASSIGN(std::vector<data::ConvertedSplit> written, data::WriteIdxAsCsv(idx, csv));
  EXPECT_EQ(written[0].examples[0], 12000);
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(csv + "/fashion-mnist_test.csv"));
  EXPECT_EQ(text.substr(0, 29), "label,pixel1,pixel2,pixel3,pi");
  ASSERT_OK_AND_ASSIGN(model::ModelConfigFile config,
                       model::LoadModelConfigFile("configs/fashion_mnist_csv.pbtxt"));
  ASSERT_OK_AND_ASSIGN(train::LocalResult got, train::RunLocal(Job(config.job, csv), 100000));
  EXPECT_EQ(got.steps, want.steps);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.test_loss, want.test_loss);
  EXPECT_EQ(got.test_accuracy, want.test_accuracy);

  const std::string tfrecord = testing::TempDir() + "/tfrecord";
  ASSERT_OK(
      data::WriteCsvAsTfRecord(csv, config.job.input, tfrecord, data::Compression::kGzip).status());
  model::JobSpec converted = Job(config.job, tfrecord);
  ASSERT_OK(data::SetInputFormat("tfrecord", &converted.input));
  converted.input.train_files = "train-*";
  converted.input.test_files = "test-*";
  ASSERT_OK_AND_ASSIGN(got, train::RunLocal(converted, 100000));
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.test_accuracy, want.test_accuracy);
}

}  // namespace
}  // namespace pstrain
