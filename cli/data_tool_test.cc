#include "cli/data_tool.h"

#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/input.h"
#include "data/png_image.h"
#include "data/tfrecord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// `n` Examples as TensorFlow Datasets stores images: "image" a 2 x 3 gray
// PNG of value i + first, "label" i % 3.
void WriteImages(const std::string& path, int first, int n) {
  ASSERT_OK_AND_ASSIGN(auto writer, data::TfRecordWriter::Open(path, data::Compression::kNone));
  for (int i = first; i < first + n; ++i) {
    v1::Example e;
    auto& m = *e.mutable_features()->mutable_feature();
    const std::vector<uint8_t> pixels(6, static_cast<uint8_t>(i));
    ASSERT_OK_AND_ASSIGN(std::string png, data::EncodePng(pixels.data(), 2, 3, 1));
    m["image"].mutable_bytes_list()->add_value(png);
    m["label"].mutable_int64_list()->add_value(i % 3);
    ASSERT_OK(writer->Write(e.SerializeAsString()));
  }
  ASSERT_OK(writer->Close());
}

// A user's own files: what `data inspect` prints, and its input block,
// pasted into a config, reads them.
TEST(DataToolTest, InspectPrintsTheFeaturesAndABlockThatReadsTheFiles) {
  const std::string dir = testing::TempDir() + "/inspect";
  ASSERT_OK(MakeDirs(dir));
  WriteImages(dir + "/train-00000.tfrecord", 0, 9);
  WriteImages(dir + "/test-00000.tfrecord", 100, 4);
  ASSERT_OK_AND_ASSIGN(std::string text, InspectRecords("train-*", dir, 1000));
  EXPECT_THAT(text, HasSubstr("1 of 1 files, 9 records read\n"));
  EXPECT_THAT(text, HasSubstr("image                bytes_list  1                 PNG 2x3x1 (6 "
                              "values)\n"));
  EXPECT_THAT(text, HasSubstr("label                int64_list  1                 0..2\n"));
  const size_t block = text.find("input {");
  ASSERT_NE(block, std::string::npos) << text;
  ASSERT_OK_AND_ASSIGN(
      model::ModelConfigFile config,
      model::ParseModelConfigFile(
          text.substr(block) + "layer { name: \"out\" dense { units: 3 } }\n", "inspected.pbtxt"));
  ASSERT_OK_AND_ASSIGN(data::Dataset train,
                       data::LoadInputSplit(dir, config.job.input, data::Split::kTrain, 3));
  ASSERT_OK_AND_ASSIGN(data::Dataset test,
                       data::LoadInputSplit(dir, config.job.input, data::Split::kTest, 3));
  EXPECT_EQ(train.num_examples, 9);
  EXPECT_EQ(test.num_examples, 4);
  EXPECT_EQ(train.example_dim, 6);
  EXPECT_EQ(train.features[6 * 5], 5 * (1.0f / 255.0f));
  EXPECT_EQ(test.labels, (std::vector<int32_t>{1, 2, 0, 1}));

  EXPECT_EQ(InspectRecords("nothing-*", dir, 10).status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(std::string some, InspectRecords("train-*", dir, 4));
  EXPECT_THAT(some, HasSubstr("1 of 1 files, 4 records read (the first 4: --records)\n"));
}

}  // namespace
}  // namespace pstrain
