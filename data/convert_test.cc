#include "data/convert.h"

#include <string>

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
#include "data/idx_reader.h"
#include "data/input.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

// A small IDX data set: n examples of 2 x 3 pixels (value 10 * i + j) and
// labels i % 10.
std::string WriteIdx(const std::string& name, int n_train, int n_test) {
  const std::string dir = testing::TempDir() + "/" + name;
  EXPECT_OK(MakeDirs(dir));
  for (auto [prefix, n] : {std::pair{"train", n_train}, std::pair{"t10k", n_test}}) {
    IdxArray images, labels;
    images.dims = {n, 2, 3};
    labels.dims = {n};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 6; ++j) images.values.push_back(static_cast<uint8_t>(10 * i + j));
      labels.values.push_back(static_cast<uint8_t>(i % 10));
    }
    EXPECT_OK(WriteIdxFile(dir + "/" + prefix + "-images-idx3-ubyte", images));
    EXPECT_OK(WriteIdxFile(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels));
  }
  return dir;
}

InputSpec ImageInput(int dim) {
  InputSpec in;
  in.format = InputFormat::kTfRecord;
  in.train_files = "train-*.tfrecord*";
  in.test_files = "test-*.tfrecord*";
  FeatureDef image;
  image.name = "image";
  image.length = dim;
  in.features.features = {image};
  return in;
}

TEST(ConvertTest, TfRecordsHoldExactlyTheIdxExamples) {
  const std::string idx = WriteIdx("idx", 23, 7);
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string out = testing::TempDir() + (c == Compression::kGzip ? "/tf-gz" : "/tf");
    ASSERT_OK_AND_ASSIGN(auto splits, WriteIdxAsTfRecord(idx, out, 4, c));
    ASSERT_EQ(splits.size(), 2u);
    EXPECT_EQ(splits[0].examples, (std::vector<int64_t>{5, 6, 6, 6}));
    EXPECT_EQ(splits[0].files[3],
              out + "/train-00003-of-00004.tfrecord" + (c == Compression::kGzip ? ".gz" : ""));
    EXPECT_EQ(splits[1].examples, std::vector<int64_t>{7});
    for (Split split : {Split::kTrain, Split::kTest}) {
      ASSERT_OK_AND_ASSIGN(Dataset want, LoadMnistFormat(idx, split));
      ASSERT_OK_AND_ASSIGN(Dataset got, LoadInputSplit(out, ImageInput(6), split, 10));
      EXPECT_EQ(got.num_examples, want.num_examples);
      EXPECT_EQ(got.example_dim, want.example_dim);
      EXPECT_EQ(got.features, want.features);  // bit for bit
      EXPECT_EQ(got.labels, want.labels);
    }
    // Written once: a second conversion into the same place is refused.
    EXPECT_EQ(WriteIdxAsTfRecord(idx, out, 4, c).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(
      WriteIdxAsTfRecord(idx, testing::TempDir() + "/x", 24, Compression::kNone).status().message(),
      "files=24: must be from 1 to 23 (the training examples, one at least per file)");
  EXPECT_EQ(WriteIdxAsTfRecord(idx, idx, 1, Compression::kNone).status().message(),
            idx + " is the data directory itself");
}

}  // namespace
}  // namespace pstrain::data
