#include "data/input.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/testing/tfrecord_files.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// Example i: "x" = {i, -i}, "tok" = i % 3 + 1 tokens, label i % 4.
std::string ExampleBytes(int i) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  m["x"].mutable_float_list()->add_value(static_cast<float>(i));
  m["x"].mutable_float_list()->add_value(static_cast<float>(-i));
  for (int k = 0; k <= i % 3; ++k) m["tok"].mutable_int64_list()->add_value(i + k);
  m["label"].mutable_int64_list()->add_value(i % 4);
  return e.SerializeAsString();
}

InputSpec Spec(const std::string& train, const std::string& test = "") {
  InputSpec in;
  in.format = InputFormat::kTfRecord;
  in.train_files = train;
  in.test_files = test;
  FeatureDef x;
  x.name = "x";
  x.length = 2;
  FeatureDef tok;
  tok.name = "tok";
  tok.type = FeatureType::kInt64;
  tok.max_len = 2;
  in.features.features = {x, tok};
  return in;
}

// `files` files of consecutive examples, `per_file` each, under a fresh
// directory: part-00000.tfrecord[.gz]...
std::string WriteFiles(const std::string& name, int files, int per_file, bool gzip = false) {
  absl::StatusOr<std::string> dir =
      testing::WriteExampleFiles(name, files, per_file, gzip, ExampleBytes);
  EXPECT_OK(dir.status());
  return dir.ok() ? *dir : "";
}

TEST(InputTest, ReadsEveryExampleOfTheFilesAPatternNames) {
  const std::string dir = WriteFiles("plain", 3, 5, /*gzip=*/true);
  ASSERT_OK_AND_ASSIGN(Dataset ds, LoadInputSplit(dir, Spec("part-*.tfrecord.gz"), Split::kTrain,
                                                  /*num_classes=*/4));
  ASSERT_EQ(ds.num_examples, 15);
  EXPECT_EQ(ds.example_dim, 2);
  EXPECT_EQ(ds.ids_dim, 2);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(ds.features[2 * i], i);
    EXPECT_EQ(ds.features[2 * i + 1], -i);
    EXPECT_EQ(ds.ids[2 * i], i);
    EXPECT_EQ(ds.ids[2 * i + 1], i % 3 >= 1 ? i + 1 : 0);  // padded with 0
    EXPECT_EQ(ds.labels[i], i % 4);
  }
  // An absolute pattern ignores data_dir.
  ASSERT_OK_AND_ASSIGN(
      ds, LoadInputSplit("/nonexistent", Spec(dir + "/part-0000[12]*"), Split::kTrain, 4));
  EXPECT_EQ(ds.num_examples, 10);
  EXPECT_EQ(ds.features[0], 5);

  EXPECT_EQ(LoadInputSplit(dir, Spec("train-*"), Split::kTrain, 4).status().message(),
            "no file matches " + dir + "/train-*");
  // A data directory that is not there is named as such (as a missing IDX
  // file is), NotFound: the configuration's, exit 2 for a task.
  absl::Status missing =
      LoadInputSplit(dir + "/nope", Spec("part-*"), Split::kTrain, 4).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "no such directory " + dir + "/nope (where the input's files " +
                                   dir + "/nope/part-* are looked for)");
  EXPECT_EQ(LoadInputSplit(dir, Spec("part-*"), Split::kTest, 4).status().message(),
            "the input is TFRecord but names no test_files");
  // Labels above the model's classes are named.
  auto small = LoadInputSplit(dir, Spec("part-*"), Split::kTrain, 3);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kDataLoss);
  size_t fourth = 0;  // the offset of example 3, after three framed ones
  for (int i = 0; i < 3; ++i) fourth += 12 + ExampleBytes(i).size() + 4;
  EXPECT_EQ(std::string(small.status().message()),
            dir + "/part-00000.tfrecord.gz at byte " + std::to_string(fourth) +
                ": label \"label\" is 3, outside the classes [0, 3)");
}

// Which examples (by their first feature) each replica's iterator gives in
// its first epoch, batch 1.
std::vector<std::multiset<int>> EpochOfEachReplica(const std::string& dir, int replicas,
                                                   bool* by_file, int64_t* split_examples) {
  std::vector<std::multiset<int>> seen(replicas);
  for (int r = 0; r < replicas; ++r) {
    auto data = LoadInput(dir, Spec("part-*"), Split::kTrain, r, replicas, 4);
    EXPECT_OK(data.status());
    *by_file = data->by_file;
    *split_examples = data->split_examples;
    ShardIterator it(&data->dataset, data->by_file ? 0 : r, data->by_file ? 1 : replicas, 1, 9);
    float x[2];
    int32_t y;
    for (int64_t i = 0; i < it.batches_per_epoch(); ++i) {
      EXPECT_OK(it.Next(x, &y).status());
      seen[r].insert(static_cast<int>(x[0]));
    }
  }
  return seen;
}

// The real Fashion-MNIST test split, loaded for scoring: its bytes stand
// for the floats, bit for bit; other formats ignore the option.
TEST(InputTest, IdxSplitForScoringIsHeldAsBytesThatWidenToItsFloats) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  InputSpec idx;
  ASSERT_OK_AND_ASSIGN(Dataset floats, LoadInputSplit(dir, idx, Split::kTest, 10));
  ASSERT_OK_AND_ASSIGN(Dataset bytes, LoadInputSplit(dir, idx, Split::kTest, 10, true));
  EXPECT_EQ(bytes.num_examples, 10000);
  EXPECT_TRUE(bytes.features.empty());
  EXPECT_EQ(bytes.pixels.size(), 10000u * 784);
  EXPECT_EQ(bytes.labels, floats.labels);
  std::vector<float> widened(floats.features.size());
  CopyFeatures(bytes, 0, bytes.num_examples, widened.data());
  EXPECT_TRUE(widened == floats.features);
  const std::string records = WriteFiles("scoring", 1, 5);
  InputSpec in = Spec(records + "/part-*", records + "/part-*");
  ASSERT_OK_AND_ASSIGN(Dataset decoded, LoadInputSplit(records, in, Split::kTest, 4, true));
  EXPECT_EQ(decoded.features.size(), 10u);
  EXPECT_TRUE(decoded.pixels.empty());
}

// Example i: "img" the raw bytes {i, 2i, 255 - i} (none for i = missing),
// "tok" id i % 5 + 1, label i % 4.
std::string ImageExampleBytes(int i, int missing) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  if (i != missing) {
    const char pixels[3] = {static_cast<char>(i), static_cast<char>(2 * i),
                            static_cast<char>(255 - i)};
    m["img"].mutable_bytes_list()->add_value(std::string(pixels, 3));
  }
  m["tok"].mutable_int64_list()->add_value(i % 5 + 1);
  m["label"].mutable_int64_list()->add_value(i % 4);
  return e.SerializeAsString();
}

InputSpec ImageSpec(const std::string& dir) {
  InputSpec in;
  in.format = InputFormat::kTfRecord;
  in.train_files = dir + "/part-*";
  in.test_files = dir + "/part-*";
  FeatureDef img;
  img.name = "img";
  img.length = 3;
  img.decode = FeatureDecode::kRawUint8;
  img.scale = 1.0f / 255.0f;
  FeatureDef tok;
  tok.name = "tok";
  tok.type = FeatureType::kInt64;
  tok.vocabulary = 10;
  in.features.features = {img, tok};
  return in;
}

// TFRecord images stored as bytes are held as bytes where a split is only
// scored or cut into batches, widening to the floats a float load holds;
// a value that is not a byte times the scale (a default_value) turns the
// split to floats, keeping every value.
TEST(InputTest, ByteImagesFromRecordsAreHeldAsBytesWhileTheyAreBytes) {
  ASSERT_OK_AND_ASSIGN(std::string dir,
                       testing::WriteExampleFiles("images", 2, 6, false,
                                                  [](int i) { return ImageExampleBytes(i, -1); }));
  const InputSpec in = ImageSpec(dir);
  EXPECT_EQ(ByteImageScale(in), 1.0f / 255.0f);
  ASSERT_OK_AND_ASSIGN(Dataset floats, LoadInputSplit(dir, in, Split::kTrain, 4));
  ASSERT_OK_AND_ASSIGN(Dataset bytes, LoadInputSplit(dir, in, Split::kTrain, 4, true));
  EXPECT_EQ(floats.features.size(), 12u * 3);
  EXPECT_TRUE(bytes.features.empty());
  EXPECT_EQ(bytes.pixels.size(), 12u * 3);
  EXPECT_EQ(bytes.pixels[3 * 7 + 2], 255 - 7);
  EXPECT_EQ(bytes.pixel_scale, 1.0f / 255.0f);
  EXPECT_EQ(bytes.ids, floats.ids);
  EXPECT_EQ(bytes.labels, floats.labels);
  std::vector<float> widened(floats.features.size());
  CopyFeatures(bytes, 0, bytes.num_examples, widened.data());
  EXPECT_TRUE(widened == floats.features);
  // Replica 1 of 2 reads the second file whole, as bytes, for batches.
  ASSERT_OK_AND_ASSIGN(ReplicaData second, LoadInput(dir, in, Split::kTrain, 1, 2, 4, true));
  EXPECT_TRUE(second.by_file);
  EXPECT_EQ(second.dataset.pixels,
            std::vector<uint8_t>(bytes.pixels.begin() + 18, bytes.pixels.end()));

  // Example 8 (in the second file) lacks its image: its default, 0.5,
  // is no byte times 1/255, so from there the split is floats.
  ASSERT_OK_AND_ASSIGN(std::string gap_dir,
                       testing::WriteExampleFiles("images-gap", 2, 6, false,
                                                  [](int i) { return ImageExampleBytes(i, 8); }));
  InputSpec gap = ImageSpec(gap_dir);
  gap.features.features[0].has_default = true;
  gap.features.features[0].default_value = 0.5f;
  ASSERT_OK_AND_ASSIGN(Dataset gap_floats, LoadInputSplit(gap_dir, gap, Split::kTrain, 4));
  ASSERT_OK_AND_ASSIGN(Dataset gap_bytes, LoadInputSplit(gap_dir, gap, Split::kTrain, 4, true));
  EXPECT_TRUE(gap_bytes.pixels.empty());
  EXPECT_EQ(gap_bytes.num_examples, 12);
  EXPECT_TRUE(gap_bytes.features == gap_floats.features);
  EXPECT_EQ(gap_bytes.features[3 * 8], 0.5f * (1.0f / 255.0f));
  EXPECT_EQ(gap_bytes.features[3 * 9 + 1], 18 * (1.0f / 255.0f));

  // Only an input whose one dense feature is a byte image is held so.
  InputSpec two = in;
  FeatureDef more;
  more.name = "more";
  two.features.features.push_back(more);
  EXPECT_EQ(ByteImageScale(two), 0);
  InputSpec plain = in;
  plain.features.features[0].decode = FeatureDecode::kValues;
  EXPECT_EQ(ByteImageScale(plain), 0);
  plain.features.features[0].decode = FeatureDecode::kRawFloat32;
  EXPECT_EQ(ByteImageScale(plain), 0);
  EXPECT_EQ(ByteImageScale(InputSpec()), 0);  // IDX: held as bytes its own way
}

TEST(InputTest, ShardsByFileOrByRecordGivingEachExampleToOneReplica) {
  for (const auto& [files, replicas, want_by_file] :
       {std::tuple{4, 2, true}, std::tuple{5, 2, true}, std::tuple{2, 3, false},
        std::tuple{1, 2, false}}) {
    const std::string dir = WriteFiles(absl::StrFormat("shard-%d-%d", files, replicas), files, 6);
    bool by_file = false;
    int64_t split_examples = 0;
    auto seen = EpochOfEachReplica(dir, replicas, &by_file, &split_examples);
    EXPECT_EQ(by_file, want_by_file) << files << " files, " << replicas << " replicas";
    EXPECT_EQ(split_examples, files * 6);
    std::multiset<int> all;
    for (const auto& s : seen) all.insert(s.begin(), s.end());
    std::multiset<int> want;
    for (int i = 0; i < files * 6; ++i) want.insert(i);
    EXPECT_EQ(all, want) << files << " files, " << replicas << " replicas";
  }
}

TEST(InputTest, StopsAtABadRecordOrSkipsAndCountsIt) {
  const std::string dir = WriteFiles("bad", 1, 4);
  const std::string path = dir + "/part-00000.tfrecord";
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  // Record 1's data: flip a byte (its data CRC fails); record 2: replace
  // it with a framed record that is not an Example.
  const size_t r0 = 12 + ExampleBytes(0).size() + 4;
  bytes[r0 + 12] ^= 0x40;
  const size_t r2 = r0 + 12 + ExampleBytes(1).size() + 4;
  const std::string not_example = FrameRecord("\x0a\x09");
  const size_t r3 = r2 + 12 + ExampleBytes(2).size() + 4;
  bytes = bytes.substr(0, r2) + not_example + bytes.substr(r3);
  ASSERT_OK(WriteFileAtomically(path, bytes));

  InputSpec in = Spec("part-*");
  auto strict = LoadInput(dir, in, Split::kTrain, 0, 1, 4);
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(std::string(strict.status().message()),
            path + " at byte " + std::to_string(r0) + ": the checksum of the record's " +
                std::to_string(ExampleBytes(1).size()) +
                " bytes of data does not match (corrupt data or checksum)");
  in.skip_bad_records = true;
  ASSERT_OK_AND_ASSIGN(ReplicaData data, LoadInput(dir, in, Split::kTrain, 0, 1, 4));
  EXPECT_EQ(data.skipped_records, 2);
  ASSERT_EQ(data.dataset.num_examples, 2);
  EXPECT_EQ(data.dataset.features[0], 0);
  EXPECT_EQ(data.dataset.features[2], 3);

  // A last record cut short: the rest of the file is skipped as one.
  ASSERT_OK(WriteFileAtomically(path, bytes.substr(0, bytes.size() - 3)));
  ASSERT_OK_AND_ASSIGN(data, LoadInput(dir, in, Split::kTrain, 0, 1, 4));
  EXPECT_EQ(data.skipped_records, 3);
  EXPECT_EQ(data.dataset.num_examples, 1);
}

}  // namespace
}  // namespace pstrain::data
