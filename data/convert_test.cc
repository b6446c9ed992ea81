#include "data/convert.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/idx_reader.h"
#include "data/input.h"
#include "data/png_image.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

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

// The images as TensorFlow's MNIST converter ("image_raw") and TensorFlow
// Datasets (PNG) store them decode to the same floats as the IDX files.
TEST(ConvertTest, RawAndPngImagesDecodeToTheIdxFloats) {
  const std::string idx = WriteIdx("idx-encoded", 9, 4);
  for (ImageEncoding encoding : {ImageEncoding::kRaw, ImageEncoding::kPng}) {
    const bool png = encoding == ImageEncoding::kPng;
    const std::string out = testing::TempDir() + (png ? "/tf-png" : "/tf-raw");
    ASSERT_OK(WriteIdxAsTfRecord(idx, out, 2, Compression::kGzip, encoding).status());
    InputSpec in = ImageInput(6);
    FeatureDef& image = in.features.features[0];
    image.name = png ? "image" : "image_raw";
    image.decode = png ? FeatureDecode::kPng : FeatureDecode::kRawUint8;
    image.scale = 1.0f / 255.0f;
    for (Split split : {Split::kTrain, Split::kTest}) {
      ASSERT_OK_AND_ASSIGN(Dataset want, LoadMnistFormat(idx, split));
      ASSERT_OK_AND_ASSIGN(Dataset got, LoadInputSplit(out, in, split, 10));
      EXPECT_EQ(got.num_examples, want.num_examples);
      EXPECT_EQ(got.features, want.features);  // bit for bit
      EXPECT_EQ(got.labels, want.labels);
    }
  }
  // The raw layout's shape features, and the PNG's own shape: 2 x 3 x 1.
  ASSERT_OK_AND_ASSIGN(std::string raw,
                       IdxExample(std::vector<uint8_t>(6, 7).data(), 2, 3, 4, ImageEncoding::kRaw));
  v1::Example e;
  ASSERT_TRUE(e.ParseFromString(raw));
  const auto& f = e.features().feature();
  EXPECT_EQ(f.at("image_raw").bytes_list().value(0), std::string(6, '\x07'));
  EXPECT_EQ(f.at("height").int64_list().value(0), 2);
  EXPECT_EQ(f.at("width").int64_list().value(0), 3);
  EXPECT_EQ(f.at("depth").int64_list().value(0), 1);
  EXPECT_EQ(f.at("label").int64_list().value(0), 4);
  ASSERT_OK_AND_ASSIGN(std::string png,
                       IdxExample(std::vector<uint8_t>(6, 7).data(), 2, 3, 4, ImageEncoding::kPng));
  ASSERT_TRUE(e.ParseFromString(png));
  std::vector<uint8_t> pixels;
  ASSERT_OK_AND_ASSIGN(
      PngShape shape,
      DecodePng(e.features().feature().at("image").bytes_list().value(0), 100, &pixels));
  EXPECT_EQ(shape.height, 2);
  EXPECT_EQ(shape.width, 3);
  EXPECT_EQ(shape.channels, 1);
  EXPECT_EQ(ParseImageEncoding("gif").status().message(),
            "image encoding \"gif\" is not one of floats, raw, png, jpeg");
}

// A CSV input of every kind of feature: "px" two float columns, "color" a
// string column (vocabulary file), "n" an int64 column, "text" a text
// column of up to 3 words (hashed); a header names the columns.
InputSpec CsvKinds(const std::string& dir) {
  EXPECT_OK(WriteFileAtomically(dir + "/colors.txt", "red\ngreen\n"));
  InputSpec in;
  EXPECT_OK(SetInputFormat("csv", &in));
  in.train_files = "train-*.csv";
  in.test_files = "held out.csv";
  FeatureDef px;
  px.name = "px";
  px.column = "p0";
  px.length = 2;
  px.has_default = true;
  px.default_value = -1;
  FeatureDef color;
  color.name = "color";
  color.type = FeatureType::kString;
  color.vocabulary_file = "colors.txt";
  FeatureDef n;
  n.name = "n";
  n.type = FeatureType::kInt64;
  n.vocabulary = 1000;
  FeatureDef text;
  text.name = "text";
  text.type = FeatureType::kString;
  text.max_len = 3;
  text.hash_buckets = 50;
  in.features.features = {px, color, n, text};
  return in;
}

TEST(ConvertTest, CsvRowsBecomeExamplesThatDecodeAsTheRowsDo) {
  const std::string dir = testing::TempDir() + "/csv";
  ASSERT_OK(MakeDirs(dir));
  const std::string header = "label,p0,p1,color,n,text\n";
  ASSERT_OK(WriteFileAtomically(
      dir + "/train-a.csv", header + "1,0.25,,red,3,\"One, two; THREE four\"\n2,1,2,blue,4,\n"));
  ASSERT_OK(WriteFileAtomically(dir + "/train-b.csv", header + "0,5,6,,999,\"say \"\"hi\"\"\"\n"));
  ASSERT_OK(WriteFileAtomically(dir + "/held out.csv", header + "1,7,8,green,0,words\n"));
  const InputSpec csv = CsvKinds(dir);
  const std::string out = dir + "/tfrecord";
  ASSERT_OK_AND_ASSIGN(std::vector<ConvertedSplit> splits,
                       WriteCsvAsTfRecord(dir, csv, out, Compression::kGzip));
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].files, (std::vector<std::string>{out + "/train-00000-of-00002.tfrecord.gz",
                                                       out + "/train-00001-of-00002.tfrecord.gz"}));
  EXPECT_EQ(splits[0].examples, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(splits[1].files, (std::vector<std::string>{out + "/test-00000-of-00001.tfrecord.gz"}));

  InputSpec tfrecord = csv;
  tfrecord.format = InputFormat::kTfRecord;
  tfrecord.train_files = out + "/train-*";
  tfrecord.test_files = out + "/test-*";
  for (Split split : {Split::kTrain, Split::kTest}) {
    ASSERT_OK_AND_ASSIGN(Dataset from_csv, LoadInputSplit(dir, csv, split, 3));
    ASSERT_OK_AND_ASSIGN(Dataset from_tfrecord, LoadInputSplit(dir, tfrecord, split, 3));
    EXPECT_EQ(from_tfrecord.features, from_csv.features);
    EXPECT_EQ(from_tfrecord.ids, from_csv.ids);
    EXPECT_EQ(from_tfrecord.labels, from_csv.labels);
  }
  ASSERT_OK_AND_ASSIGN(Dataset train, LoadInputSplit(dir, csv, Split::kTrain, 3));
  EXPECT_EQ(train.features, (std::vector<float>{0.25, -1, 1, 2, 5, 6}));
  ASSERT_EQ(train.ids.size(), 3u * 5);
  // red 2, blue 1 (unknown), empty 0; the text's first three words.
  EXPECT_EQ(train.ids[0], 2);
  EXPECT_EQ(train.ids[1], 3);
  EXPECT_EQ(train.ids[2], static_cast<int64_t>(1 + StableHash("one") % 50));
  EXPECT_EQ(train.ids[4], static_cast<int64_t>(1 + StableHash("three") % 50));
  EXPECT_EQ(train.ids[5], 1);
  EXPECT_EQ(std::vector<int64_t>(train.ids.begin() + 7, train.ids.begin() + 10),
            (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(train.ids[10], 0);

  // A bad row stops it, named by line, and leaves no half-written file.
  ASSERT_OK(WriteFileAtomically(dir + "/train-b.csv", header + "0,5,6,,9999,x\n"));
  const std::string out2 = dir + "/tfrecord2";
  absl::StatusOr<std::vector<ConvertedSplit>> bad =
      WriteCsvAsTfRecord(dir, csv, out2, Compression::kGzip);
  EXPECT_EQ(bad.status().message(),
            dir +
                "/train-b.csv line 2: column \"n\": feature \"n\": id 9999 is outside its "
                "vocabulary [0, 1000)");
  EXPECT_FALSE(std::filesystem::exists(out2 + "/train-00001-of-00002.tfrecord.gz"));
  EXPECT_FALSE(std::filesystem::exists(out2 + "/train-00001-of-00002.tfrecord.gz.tmp"));
  InputSpec skipping = csv;
  skipping.skip_bad_records = true;
  ASSERT_OK_AND_ASSIGN(splits,
                       WriteCsvAsTfRecord(dir, skipping, dir + "/tfrecord3", Compression::kNone));
  EXPECT_EQ(splits[0].examples, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(splits[0].skipped, 1);
  EXPECT_EQ(
      WriteCsvAsTfRecord(dir, skipping, dir + "/tfrecord3", Compression::kNone).status().message(),
      dir +
          "/tfrecord3 already holds test-00000-of-00001.tfrecord: write to a directory "
          "without data files");
}

}  // namespace
}  // namespace pstrain::data
