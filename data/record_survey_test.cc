#include "data/record_survey.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/png_image.h"
#include "data/testing/tfrecord_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

using ::testing::HasSubstr;

// Example i, TensorFlow Datasets' way: "image" a 2 x 3 gray PNG, "label"
// i % 10; with "score" (i % 3 + 1 floats), "word" (one string, every
// other example) and "user" (an int64 id up to 41).
std::string TfdsStyle(int i) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  std::vector<uint8_t> pixels(6, static_cast<uint8_t>(i));
  m["image"].mutable_bytes_list()->add_value(*EncodePng(pixels.data(), 2, 3, 1));
  m["label"].mutable_int64_list()->add_value(i % 10);
  for (int k = 0; k <= i % 3; ++k) m["score"].mutable_float_list()->add_value(0.5f * k);
  if (i % 2 == 0) m["word"].mutable_bytes_list()->add_value(i % 4 == 0 ? "cat" : "dog");
  m["user"].mutable_int64_list()->add_value(i * 3 % 42);
  return e.SerializeAsString();
}

// TensorFlow's MNIST convert_to_records layout: "image_raw" 4 x 5 bytes,
// "height", "width", "depth", and the label.
std::string ConvertToRecordsStyle(int i) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  m["image_raw"].mutable_bytes_list()->add_value(std::string(20, static_cast<char>(200 + i)));
  m["height"].mutable_int64_list()->add_value(4);
  m["width"].mutable_int64_list()->add_value(5);
  m["depth"].mutable_int64_list()->add_value(1);
  m["label"].mutable_int64_list()->add_value(i % 2);
  return e.SerializeAsString();
}

TEST(RecordSurveyTest, SaysWhatEachFeatureHoldsAndTheBlockThatReadsIt) {
  ASSERT_OK_AND_ASSIGN(std::string dir, testing::WriteExampleFiles("tfds", 2, 10, true, TfdsStyle));
  const std::vector<std::string> files = {dir + "/part-00000.tfrecord.gz",
                                          dir + "/part-00001.tfrecord.gz"};
  ASSERT_OK_AND_ASSIGN(RecordSurvey s, SurveyRecords(files, 1000));
  EXPECT_EQ(s.records, 20);
  ASSERT_EQ(s.features.size(), 5u);  // by name
  const FeatureSurvey& image = s.features[0];
  EXPECT_EQ(image.name, "image");
  EXPECT_EQ(image.kind, ListKind::kBytes);
  EXPECT_TRUE(image.all_png && image.png_same_shape);
  EXPECT_EQ(image.png.values(), 6);
  const FeatureSurvey& label = s.features[1];
  EXPECT_EQ(label.kind, ListKind::kInt64);
  EXPECT_EQ(label.min_value, 0);
  EXPECT_EQ(label.max_value, 9);
  const FeatureSurvey& score = s.features[2];
  EXPECT_EQ(score.kind, ListKind::kFloat);
  EXPECT_EQ(score.min_values, 1);
  EXPECT_EQ(score.max_values, 3);
  EXPECT_EQ(score.max_value, 1.0);
  const FeatureSurvey& user = s.features[3];
  EXPECT_EQ(user.max_value, 39);
  const FeatureSurvey& word = s.features[4];
  EXPECT_EQ(word.examples, 10);
  EXPECT_FALSE(word.all_png);

  const std::string block = SuggestInputBlock(s, "part-*", "");
  EXPECT_EQ(block,
            "input {\n"
            "  format: tfrecord\n"
            "  train_files: \"part-*\"\n"
            "  test_files: \"\"  # give\n"
            "  feature { name: \"image\" decode: \"png\" length: 6 scale: 0.00392156862745098 }"
            "  # 2x3x1 PNG\n"
            "  feature { name: \"score\" max_len: 3 }\n"
            "  feature { name: \"user\" type: \"int64\" length: 1 vocabulary: 40 }\n"
            "  feature { name: \"word\" type: \"string\" max_len: 1 hash_buckets: 10000 }  # or a "
            "vocabulary_file  # in 10 of 20 examples\n"
            "  label: \"label\"\n"
            "}\n");

  // At most the records asked for: the first file's 10, then 5 more.
  ASSERT_OK_AND_ASSIGN(RecordSurvey first, SurveyRecords(files, 15));
  EXPECT_EQ(first.records, 15);
  EXPECT_EQ(first.files.size(), 2u);
}

TEST(RecordSurveyTest, ReadsRawImagesByTheirShapeFeatures) {
  ASSERT_OK_AND_ASSIGN(std::string dir,
                       testing::WriteExampleFiles("raw", 1, 4, false, ConvertToRecordsStyle));
  ASSERT_OK_AND_ASSIGN(RecordSurvey s, SurveyRecords({dir + "/part-00000.tfrecord"}, 1000));
  const std::string block = SuggestInputBlock(s, "train-*", "test-*");
  EXPECT_THAT(block, HasSubstr("  feature { name: \"image_raw\" decode: \"raw_uint8\" length: 20 "
                               "scale: 0.00392156862745098 }  # 4x5x1 bytes\n"));
  EXPECT_THAT(block, HasSubstr("  # \"height\" is 4 in every example: left out\n"));
  EXPECT_THAT(block, HasSubstr("  test_files: \"test-*\"\n"));
  EXPECT_FALSE(absl::StrContains(block, "name: \"width\"")) << block;
}

// The shape a model reads from the first record: a PNG's own, raw bytes'
// from height, width and depth; none for a feature that is no image, a
// name not there, shape features that do not multiply to the bytes, or
// files that do not read.
TEST(RecordSurveyTest, TheFirstImagesShapeIsItsPngsOrItsShapeFeatures) {
  ASSERT_OK_AND_ASSIGN(std::string tfds, testing::WriteExampleFiles("shape-png", 1, 3, true, TfdsStyle));
  const std::vector<std::string> png = {tfds + "/part-00000.tfrecord.gz"};
  EXPECT_EQ(FirstImageShape(png, "image"), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_TRUE(FirstImageShape(png, "score").empty());
  EXPECT_TRUE(FirstImageShape(png, "word").empty());
  EXPECT_TRUE(FirstImageShape(png, "pixels").empty());
  ASSERT_OK_AND_ASSIGN(std::string raw,
                       testing::WriteExampleFiles("shape-raw", 1, 2, false, ConvertToRecordsStyle));
  EXPECT_EQ(FirstImageShape({raw + "/part-00000.tfrecord"}, "image_raw"),
            (std::vector<int64_t>{4, 5, 1}));
  ASSERT_OK_AND_ASSIGN(std::string off, testing::WriteExampleFiles("shape-off", 1, 1, false, [](int) {
    v1::Example e;
    auto& m = *e.mutable_features()->mutable_feature();
    m["image_raw"].mutable_bytes_list()->add_value(std::string(60, 'x'));
    m["height"].mutable_int64_list()->add_value(4);
    m["width"].mutable_int64_list()->add_value(5);
    m["channels"].mutable_int64_list()->add_value(3);
    return e.SerializeAsString();
  }));
  EXPECT_EQ(FirstImageShape({off + "/part-00000.tfrecord"}, "image_raw"),
            (std::vector<int64_t>{4, 5, 3}));
  ASSERT_OK(WriteFileAtomically(off + "/part-00000.tfrecord", "not a record"));
  EXPECT_TRUE(FirstImageShape({off + "/part-00000.tfrecord"}, "image_raw").empty());
}

TEST(RecordSurveyTest, NamesTheFileAndRecordThatIsNotAnExample) {
  const std::string dir = testing::TempDir() + "/bad-survey";
  ASSERT_OK_AND_ASSIGN(std::string written,
                       testing::WriteExampleFiles("bad-survey", 1, 3, false, [](int i) {
                         return i == 2 ? std::string("\x0a\x09", 2) : TfdsStyle(i);
                       }));
  absl::Status s = SurveyRecords({written + "/part-00000.tfrecord"}, 100).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), written +
                             "/part-00000.tfrecord record 2: Example at byte 0: field 1 "
                             "says 9 bytes but 0 remain");
  EXPECT_EQ(SurveyRecords({dir + "/none.tfrecord"}, 100).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain::data
