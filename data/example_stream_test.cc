#include "data/example_stream.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/input.h"
#include "data/prefetcher.h"
#include "data/testing/tfrecord_files.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// Example i: "x" = {i, -i}, "ids" = {i % 7 + 1, i % 5}, label i % 4.
std::string ExampleBytes(int i) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  m["x"].mutable_float_list()->add_value(static_cast<float>(i));
  m["x"].mutable_float_list()->add_value(static_cast<float>(-i));
  m["ids"].mutable_int64_list()->add_value(i % 7 + 1);
  m["ids"].mutable_int64_list()->add_value(i % 5);
  m["label"].mutable_int64_list()->add_value(i % 4);
  return e.SerializeAsString();
}

InputSpec Streamed(const std::string& dir, int64_t buffer) {
  InputSpec in;
  in.format = InputFormat::kTfRecord;
  in.train_files = dir + "/part-*";
  in.shuffle_buffer = buffer;
  FeatureDef x;
  x.name = "x";
  x.length = 2;
  FeatureDef ids;
  ids.name = "ids";
  ids.type = FeatureType::kInt64;
  ids.length = 2;
  in.features.features = {x, ids};
  return in;
}

// `files` files of consecutive examples, `per_file` each.
std::string WriteFiles(const std::string& name, int files, int per_file, bool gzip = false) {
  absl::StatusOr<std::string> dir =
      testing::WriteExampleFiles(name, files, per_file, gzip, ExampleBytes);
  EXPECT_OK(dir.status());
  return dir.ok() ? *dir : "";
}

// The example numbers of the next `batches` batches, checking that each
// example's ids and label are its own.
std::vector<int> Take(BatchSource* source, int batches, std::vector<int64_t>* epochs = nullptr) {
  const int b = source->batch_size();
  std::vector<float> x(2 * b);
  std::vector<int64_t> ids(2 * b);
  std::vector<int32_t> y(b);
  std::vector<int> out;
  for (int k = 0; k < batches; ++k) {
    absl::StatusOr<int64_t> epoch = source->Next(x.data(), y.data(), ids.data());
    EXPECT_OK(epoch.status());
    if (!epoch.ok()) return out;
    if (epochs != nullptr) epochs->push_back(*epoch);
    for (int j = 0; j < b; ++j) {
      const int i = static_cast<int>(x[2 * j]);
      EXPECT_EQ(x[2 * j + 1], -i);
      EXPECT_EQ(ids[2 * j], i % 7 + 1);
      EXPECT_EQ(ids[2 * j + 1], i % 5);
      EXPECT_EQ(y[j], i % 4);
      out.push_back(i);
    }
  }
  return out;
}

absl::StatusOr<TrainingInput> Open(const std::string& dir, int64_t buffer, int replica = 0,
                                   int replicas = 1, int batch = 4, uint64_t seed = 9) {
  return OpenTrainingInput("", Streamed(dir, buffer), replica, replicas, batch, seed, 4);
}

TEST(ExampleStreamTest, EachEpochIsAShuffleOfTheWholeShare) {
  const std::string dir = WriteFiles("whole", 3, 20, /*gzip=*/true);
  ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, /*buffer=*/1000));
  EXPECT_TRUE(in.streamed);
  EXPECT_EQ(in.split_examples, 60);
  EXPECT_EQ(in.source->shard_size(), 60);
  EXPECT_EQ(in.source->batches_per_epoch(), 15);
  std::vector<int64_t> epochs;
  const std::vector<int> first = Take(in.source.get(), 15, &epochs);
  const std::vector<int> second = Take(in.source.get(), 15, &epochs);
  EXPECT_EQ(epochs.front(), 0);
  EXPECT_EQ(epochs.back(), 1);
  for (const auto& epoch : {first, second}) {
    std::vector<int> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 60; ++i) ASSERT_EQ(sorted[i], i);
  }
  EXPECT_NE(first, second);
  // The same seed gives the same stream.
  ASSERT_OK_AND_ASSIGN(TrainingInput again, Open(dir, 1000));
  EXPECT_EQ(Take(again.source.get(), 15), first);
}

TEST(ExampleStreamTest, ABufferOfOneReadsEachFileInOrder) {
  const std::string dir = WriteFiles("ordered", 3, 8);
  ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, /*buffer=*/1));
  const std::vector<int> epoch = Take(in.source.get(), 6);
  // Three runs of 8 consecutive examples, the files in a drawn order.
  std::set<int> starts;
  for (int run = 0; run < 3; ++run) {
    const int start = epoch[run * 8];
    EXPECT_EQ(start % 8, 0);
    starts.insert(start);
    for (int k = 0; k < 8; ++k) EXPECT_EQ(epoch[run * 8 + k], start + k);
  }
  EXPECT_EQ(starts.size(), 3u);
}

TEST(ExampleStreamTest, ABoundedBufferMixesOnlyNearbyRecords) {
  const std::string dir = WriteFiles("bounded", 1, 400);
  ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, /*buffer=*/10));
  const std::vector<int> epoch = Take(in.source.get(), 100);
  // The k-th example out is one of the first k + 10 read.
  for (int k = 0; k < 400; ++k) EXPECT_LT(epoch[k], k + 10) << k;
  std::vector<int> sorted = epoch;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted.front(), 0);
  EXPECT_EQ(sorted.back(), 399);
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
}

TEST(ExampleStreamTest, ShardsByRecordWithFewerFilesThanReplicas) {
  const std::string dir = WriteFiles("byrecord", 2, 25);
  std::set<int> seen;
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, 1000, r, 3, /*batch=*/1));
    EXPECT_FALSE(in.by_file);
    EXPECT_EQ(in.split_examples, 50);
    EXPECT_EQ(in.source->shard_size(), r < 2 ? 17 : 16);
    for (int i : Take(in.source.get(), static_cast<int>(in.source->shard_size()))) {
      EXPECT_TRUE(seen.insert(i).second) << i << " taken twice";
    }
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(ExampleStreamTest, ShardsByFileWithAtLeastAsManyFilesAsReplicas) {
  const std::string dir = WriteFiles("byfile", 5, 10);
  ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, 1000, /*replica=*/1, /*replicas=*/2, 2));
  EXPECT_TRUE(in.by_file);
  EXPECT_EQ(in.files_read, 2);  // files 1 and 3
  EXPECT_EQ(in.split_examples, 50);
  EXPECT_EQ(in.source->shard_size(), 20);
  for (int i : Take(in.source.get(), 10)) EXPECT_TRUE(i / 10 == 1 || i / 10 == 3) << i;
}

TEST(ExampleStreamTest, SeekLandsWhereNextWouldHave) {
  const std::string dir = WriteFiles("skip", 3, 14);
  for (int batches : {0, 3, 10, 11, 25}) {  // 10 per epoch: within, at and past epoch ends
    ASSERT_OK_AND_ASSIGN(TrainingInput walked, Open(dir, 7, 0, 1, /*batch=*/4));
    ASSERT_OK_AND_ASSIGN(TrainingInput skipped, Open(dir, 7, 0, 1, 4));
    std::vector<int64_t> we, se;
    Take(walked.source.get(), batches, &we);
    ASSERT_OK(skipped.source->Seek(batches));
    EXPECT_EQ(Take(walked.source.get(), 3, &we), Take(skipped.source.get(), 3, &se)) << batches;
    EXPECT_EQ(we.back(), se.back());
    // From anywhere, backward too: the walked stream seeks back to 2.
    ASSERT_OK(walked.source->Seek(2));
    ASSERT_OK_AND_ASSIGN(TrainingInput fresh, Open(dir, 7, 0, 1, 4));
    Take(fresh.source.get(), 2);
    EXPECT_EQ(Take(walked.source.get(), 12), Take(fresh.source.get(), 12)) << batches;
  }
}

// Held as the records they were read as and decoded as they leave the
// buffer (hold_encoded, for images), the stream hands out the same examples
// in the same order, Seek lands in the same place, and a record that does
// not decode is named where it was read.
TEST(ExampleStreamTest, RecordsHeldEncodedComeOutAsDecodedOnesDo) {
  const std::string dir = WriteFiles("encoded", 3, 20);
  const InputSpec input = Streamed(dir, 16);
  StreamSpec spec;
  ASSERT_OK_AND_ASSIGN(spec.files, FilesOfSplit("", input, Split::kTrain));
  spec.compressions.assign(spec.files.size(), Compression::kNone);
  spec.batch_size = 4;
  spec.seed = 9;
  spec.shuffle_buffer = 16;
  spec.num_classes = 4;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const RecordFormat> format,
                       OpenFormat("", input, {spec.files[0].path}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExampleStream> decoded, ExampleStream::Open(spec, format));
  spec.hold_encoded = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExampleStream> encoded, ExampleStream::Open(spec, format));
  const std::vector<int> want = Take(decoded.get(), 30);  // two epochs
  EXPECT_EQ(Take(encoded.get(), 30), want);
  ASSERT_OK(decoded->Seek(17));
  ASSERT_OK(encoded->Seek(17));
  const std::vector<int> after_seek = Take(decoded.get(), 5);
  EXPECT_EQ(Take(encoded.get(), 5), after_seek);

  // Labels 3 are outside 3 classes: the first one out is the error.
  spec.num_classes = 3;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ExampleStream> bad, ExampleStream::Open(spec, format));
  std::vector<float> x(8);
  std::vector<int64_t> ids(8);
  std::vector<int32_t> y(4);
  absl::Status failed = absl::OkStatus();
  for (int k = 0; k < 15 && failed.ok(); ++k) failed = bad->Next(x.data(), y.data(), ids.data()).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "/part-")) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), " at byte ")) << failed;
}

TEST(ExampleStreamTest, ABadRecordStopsTheStreamOrIsSkipped) {
  const std::string dir = WriteFiles("bad", 2, 6);
  // Record 2 of part-00001 is not an Example.
  const std::string path = dir + "/part-00001.tfrecord";
  std::vector<std::string> records;
  for (int i = 0; i < 6; ++i) records.push_back(i == 2 ? "\x0a\x05" : ExampleBytes(6 + i));
  ASSERT_OK(testing::WriteRecords(path, Compression::kNone, records));
  int64_t at = 0;
  for (int i = 0; i < 2; ++i) at += 16 + static_cast<int64_t>(records[i].size());
  // Strict: Open frames it without complaint; reading it fails, named.
  ASSERT_OK_AND_ASSIGN(TrainingInput strict, Open(dir, 1, 0, 1, /*batch=*/1));
  EXPECT_EQ(strict.split_examples, 12);
  absl::Status error;
  std::vector<float> x(2);
  int32_t y;
  for (int k = 0; k < 12 && error.ok(); ++k) error = strict.source->Next(x.data(), &y).status();
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(error.message(), path + " at byte " + std::to_string(at) +
                                 ": Example at byte 0: field 1 says 5 bytes but 0 remain");
  // Skipping: counted once, and left out of every share.
  InputSpec in = Streamed(dir, 1);
  in.skip_bad_records = true;
  ASSERT_OK_AND_ASSIGN(TrainingInput lenient, OpenTrainingInput("", in, 0, 1, 1, 9, 4));
  EXPECT_EQ(lenient.skipped_records, 1);
  EXPECT_EQ(lenient.split_examples, 11);
  std::vector<int> got = Take(lenient.source.get(), 22);  // two epochs
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::count(got.begin(), got.end(), 8), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), 7), 2);
}

TEST(ExampleStreamTest, FilesThatShrinkAfterOpenAreNamed) {
  const std::string dir = WriteFiles("shrink", 1, 10);
  ASSERT_OK_AND_ASSIGN(TrainingInput in, Open(dir, 4, 0, 1, /*batch=*/5));
  std::vector<std::string> seven;
  for (int i = 0; i < 7; ++i) seven.push_back(ExampleBytes(i));
  ASSERT_OK(testing::WriteRecords(dir + "/part-00000.tfrecord", Compression::kNone, seven));
  // Through a Prefetcher, as a trainer reads it.
  Prefetcher prefetch(in.source.get(), /*depth=*/2);
  std::vector<float> x(10);
  std::vector<int32_t> y(5);
  ASSERT_OK(prefetch.Next(x.data(), y.data()).status());
  absl::Status s = prefetch.Next(x.data(), y.data()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            "the training files hold fewer records than when the job started: epoch 0 of "
            "replica 0 ended after 7 of its 10 examples");
}

}  // namespace
}  // namespace pstrain::data
