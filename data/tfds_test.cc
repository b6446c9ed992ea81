#include "data/tfds.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/dataset.h"
#include "data/input.h"
#include "data/tfds_writer.h"
#include "data/tfrecord.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

// A dataset_info.json and features.json written by hand in the older form
// TFDS 3 used ({"type", "content"}; numbers as numbers), with `lengths`
// records in shards of Examples of one "kind" label.
std::string HandWrittenDataset(const std::string& root, const std::vector<int>& lengths) {
  const std::string dir = root + "/tiny/2.0.0";
  EXPECT_OK(MakeDirs(dir));
  std::string shard_lengths;
  for (size_t s = 0; s < lengths.size(); ++s) {
    absl::StrAppend(&shard_lengths, s == 0 ? "" : ", ", lengths[s]);
    const std::string path =
        absl::StrCat(dir, "/tiny-train.tfrecord-0000", s, "-of-0000", lengths.size());
    auto writer = TfRecordWriter::Open(path, Compression::kNone);
    EXPECT_OK(writer.status());
    v1::Example e;
    (*e.mutable_features()->mutable_feature())["kind"].mutable_int64_list()->add_value(1);
    for (int r = 0; r < lengths[s]; ++r) EXPECT_OK((*writer)->Write(e.SerializeAsString()));
    EXPECT_OK((*writer)->Close());
  }
  EXPECT_OK(WriteFileAtomically(
      dir + "/dataset_info.json",
      absl::StrCat(R"({"name": "tiny", "version": "2.0.0", "splits": [{"name": "train",
                     "numShards": )",
                   lengths.size(), R"(, "shardLengths": [)", shard_lengths,
                   R"(]}], "supervisedKeys": {"input": "pixels", "output": "kind"}})")));
  EXPECT_OK(WriteFileAtomically(dir + "/features.json", R"({
    "type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
    "content": {
      "pixels": {"type": "tensorflow_datasets.core.features.image_feature.Image",
                 "content": {"shape": [null, null, 1], "dtype": "uint8", "encoding_format": "png"}},
      "kind": {"type": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
               "content": {"num_classes": 3}}}})"));
  return dir;
}

TEST(TfdsTest, ReadsTheDirectoryPstrainDataWritesAsTfdsWritesIt) {
  TfdsWriteOptions options;
  options.shards = 3;
  options.size = 20;
  options.spread = 4;
  options.max_examples = 100;
  const std::string root = testing::TempDir() + "/tfds_written";
  ASSERT_OK_AND_ASSIGN(TfdsWritten written, WriteIdxAsTfds(kFashionMnist, root, options));
  EXPECT_EQ(written.dir, root + "/fashion_mnist_jpeg/1.0.0");
  EXPECT_EQ(written.shard_lengths, (std::vector<int64_t>{33, 33, 34}));
  EXPECT_GE(written.min_side, 16);
  EXPECT_LE(written.max_side, 24);
  EXPECT_LT(written.min_side, written.max_side);
  ASSERT_TRUE(IsTfdsDirectory(written.dir));

  ASSERT_OK_AND_ASSIGN(TfdsDataset ds, ReadTfdsDirectory(written.dir));
  EXPECT_EQ(ds.name, "fashion_mnist_jpeg");
  EXPECT_EQ(ds.version, "1.0.0");
  ASSERT_EQ(ds.splits.size(), 1u);
  EXPECT_EQ(ds.splits[0].name, "train");
  EXPECT_EQ(ds.splits[0].shard_lengths, written.shard_lengths);
  EXPECT_EQ(ds.splits[0].files, written.files);
  EXPECT_EQ(ds.splits[0].examples(), 100);
  const TfdsFeature* image = ds.ImageFeature();
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->name, "image");
  EXPECT_EQ(image->kind, "Image");
  EXPECT_EQ(image->encoding, "jpeg");
  EXPECT_EQ(image->shape, (std::vector<int64_t>{-1, -1, 3}));
  const TfdsFeature* label = ds.LabelFeature();
  ASSERT_NE(label, nullptr);
  EXPECT_EQ(label->name, "label");
  EXPECT_EQ(label->num_classes, 10);
  ASSERT_EQ(label->class_names.size(), 10u);
  EXPECT_EQ(label->class_names[9], "Ankle boot");
  ASSERT_NE(ds.FindFeature("image/filename"), nullptr);
  EXPECT_EQ(ds.FindFeature("image/filename")->kind, "Text");

  // Writing again over it is refused, and leaves it as it was.
  EXPECT_EQ(WriteIdxAsTfds(kFashionMnist, root, options).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_OK(ReadTfdsDirectory(written.dir).status());
}

TEST(TfdsTest, SplitsAreSlicedAsTfdsSlicesThem) {
  const std::string dir = HandWrittenDataset(testing::TempDir() + "/tfds_slices", {40, 30, 30});
  ASSERT_OK_AND_ASSIGN(TfdsDataset ds, ReadTfdsDirectory(dir));
  EXPECT_EQ(ds.supervised_input, "pixels");
  EXPECT_EQ(ds.ImageFeature()->encoding, "png");
  EXPECT_EQ(ds.ImageFeature()->shape, (std::vector<int64_t>{-1, -1, 1}));
  EXPECT_EQ(ds.LabelFeature()->num_classes, 3);
  auto ranges = [&](absl::string_view spec) {
    std::string text;
    absl::StatusOr<std::vector<RecordRange>> got = ResolveSplit(ds, spec);
    if (!got.ok()) return std::string(got.status().message());
    for (const RecordRange& r : *got) {
      absl::StrAppend(&text, text.empty() ? "" : " ", r.path.substr(r.path.size() - 10, 1));
      if (!r.whole()) absl::StrAppend(&text, "[", r.begin, ":", r.end, "]");
    }
    return text;
  };
  EXPECT_EQ(ranges("train"), "0 1 2");
  EXPECT_EQ(ranges("train[:80%]"), "0 1 2[0:10]");
  EXPECT_EQ(ranges("train[80%:]"), "2[10:30]");
  EXPECT_EQ(ranges("train[10:45]"), "0[10:40] 1[0:5]");
  EXPECT_EQ(ranges("train[-10:]"), "2[20:30]");
  EXPECT_EQ(ranges("train[:-75%]"), "0[0:25]");
  EXPECT_EQ(ranges("train[:50%] + train[50%:]"), "0 1[0:10] 1[10:30] 2");
  EXPECT_EQ(ranges("test"), "split \"test\": no split \"test\" in tiny (it has train)");
  EXPECT_EQ(ranges("train[:101%]"), "split \"train[:101%]\": a percent is in -100..100");
  EXPECT_EQ(ranges("train[:101]"),
            "split \"train[:101]\": the slice [0:101] is outside train's 100 records");
  EXPECT_EQ(ranges("train[50%:50%]"), "split \"train[50%:50%]\": selects no records");
  EXPECT_EQ(ranges("train[:80"),
            "split \"train[:80\": a slice is [FROM:TO], each bound a count or a percent "
            "(train[:80%])");
}

TEST(TfdsTest, PercentsRoundToTheClosestRecordTiesToEven) {
  // Python's round(), TFDS's default rounding: 2.5 -> 2, 1.5 -> 2, 3.5 -> 4.
  const std::string dir = HandWrittenDataset(testing::TempDir() + "/tfds_round", {5});
  ASSERT_OK_AND_ASSIGN(TfdsDataset ds, ReadTfdsDirectory(dir));
  auto end_of = [&](absl::string_view spec) {
    absl::StatusOr<std::vector<RecordRange>> got = ResolveSplit(ds, spec);
    return got.ok() ? (*got)[0].end : -7;
  };
  EXPECT_EQ(end_of("train[:50%]"), 2);
  EXPECT_EQ(end_of("train[:30%]"), 2);
  EXPECT_EQ(end_of("train[:70%]"), 4);
  EXPECT_EQ(end_of("train[:1%]"), -7);  // 0.05 rounds to 0: no records
}

TEST(TfdsTest, AMissingOrShortShardIsAnErrorNamingIt) {
  const std::string dir = HandWrittenDataset(testing::TempDir() + "/tfds_short", {10, 10});
  // dataset_info.json says a third shard.
  ASSERT_OK(WriteFileAtomically(dir + "/dataset_info.json",
                                R"({"name": "tiny", "splits": [{"name": "train",
                                    "shardLengths": ["10", "10", "10"]}]})"));
  absl::StatusOr<TfdsDataset> ds = ReadTfdsDirectory(dir);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            absl::StrCat(dir,
                         ": split train has 3 shards in dataset_info.json but 2 files named "
                         "tiny-train.tfrecord-*-of-*"));
  // Two shards said to hold 12 each: a slice inside the second reads past
  // what the file holds.
  ASSERT_OK(WriteFileAtomically(dir + "/dataset_info.json",
                                R"({"name": "tiny", "splits": [{"name": "train",
                                    "shardLengths": ["12", "12"]}]})"));
  ASSERT_OK_AND_ASSIGN(TfdsDataset two, ReadTfdsDirectory(dir));
  InputSpec input;
  ASSERT_OK(SetInputFormat("tfds", &input));
  input.features.features.push_back(FeatureDef{});
  input.features.features.back().name = "pixels";
  input.features.features.back().has_default = true;
  input.features.label = "kind";
  input.train_split = "train[14:23]";
  absl::StatusOr<ReplicaData> read = LoadInput(dir, input, Split::kTrain, 0, 1, 3);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::StrContains(read.status().message(), "holds 10 records; the range needs 11"))
      << read.status();

  EXPECT_EQ(ReadTfdsDirectory(testing::TempDir()).status().code(), absl::StatusCode::kNotFound);
}

// The seed's input through a TFDS directory: a slice of the train split,
// JPEGs of any size resized to the model's input, shared among replicas by
// shard.
TEST(TfdsTest, AnInputReadsASlicedSplitDecodedAndResized) {
  TfdsWriteOptions options;
  options.shards = 3;
  options.size = 24;
  options.spread = 6;
  options.max_examples = 100;
  const std::string root = testing::TempDir() + "/tfds_input";
  ASSERT_OK_AND_ASSIGN(TfdsWritten written, WriteIdxAsTfds(kFashionMnist, root, options));
  InputSpec input;
  ASSERT_OK(SetInputFormat("tfds", &input));
  FeatureDef image;
  image.name = "image";
  image.decode = FeatureDecode::kJpeg;
  image.image_shape = {16, 16, 3};
  image.length = 16 * 16 * 3;
  image.scale = 1 / 255.0f;
  input.features.features.push_back(image);
  input.train_split = "train[:80%]";
  input.test_split = "train[80%:]";
  ASSERT_OK_AND_ASSIGN(ReplicaData train,
                       LoadInput(written.dir, input, Split::kTrain, 0, 1, /*num_classes=*/10));
  ASSERT_OK_AND_ASSIGN(ReplicaData test,
                       LoadInput(written.dir, input, Split::kTest, 0, 1, /*num_classes=*/10));
  EXPECT_EQ(train.dataset.num_examples, 80);
  EXPECT_EQ(test.dataset.num_examples, 20);
  EXPECT_EQ(train.dataset.example_dim, 16 * 16 * 3);
  // The labels are Fashion-MNIST's, in order.
  ASSERT_OK_AND_ASSIGN(Dataset idx, LoadMnistFormat(kFashionMnist, Split::kTrain));
  for (int64_t e = 0; e < 80; ++e) ASSERT_EQ(train.dataset.labels[e], idx.labels[e]) << e;
  for (int64_t e = 0; e < 20; ++e) ASSERT_EQ(test.dataset.labels[e], idx.labels[80 + e]) << e;
  for (float v : train.dataset.features) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 1.0f);
  }
  // Two replicas by shard: shards 0 and 2 (its first 14 records), and 1.
  ASSERT_OK_AND_ASSIGN(ReplicaData r0, LoadInput(written.dir, input, Split::kTrain, 0, 2, 10));
  ASSERT_OK_AND_ASSIGN(ReplicaData r1, LoadInput(written.dir, input, Split::kTrain, 1, 2, 10));
  EXPECT_TRUE(r0.by_file);
  EXPECT_EQ(r0.dataset.num_examples, 33 + 14);
  EXPECT_EQ(r1.dataset.num_examples, 33);
  EXPECT_EQ(r0.split_examples, 80);
  EXPECT_EQ(r1.split_examples, 80);
  // Streamed through a shuffle buffer: one epoch is the slice, in batches.
  input.shuffle_buffer = 16;
  ASSERT_OK_AND_ASSIGN(TrainingInput streamed,
                       OpenTrainingInput(written.dir, input, 0, 1, /*batch_size=*/8, 1, 10));
  EXPECT_TRUE(streamed.streamed);
  EXPECT_EQ(streamed.split_examples, 80);
  EXPECT_EQ(streamed.source->shard_size(), 80);
  std::vector<float> features(8 * 16 * 16 * 3);
  std::vector<int32_t> labels(8);
  // Ten batches of 8 are epoch 0; the eleventh starts epoch 1.
  for (int b = 0; b < 10; ++b) {
    ASSERT_OK_AND_ASSIGN(int64_t epoch, streamed.source->Next(features.data(), labels.data()));
    ASSERT_EQ(epoch, 0) << b;
  }
  ASSERT_OK_AND_ASSIGN(int64_t next, streamed.source->Next(features.data(), labels.data()));
  EXPECT_EQ(next, 1);
  // Features the dataset does not have are named.
  input.features.features[0].name = "photo";
  absl::StatusOr<ReplicaData> missing = LoadInput(written.dir, input, Split::kTrain, 0, 1, 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "the input reads feature \"photo\", which fashion_mnist_jpeg does not have (its "
            "features: image, image/filename, label)");
}

}  // namespace
}  // namespace pstrain::data
