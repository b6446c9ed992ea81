#include "data/dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "base/testing/status_testing.h"
#include "data/idx_reader.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

TEST(DatasetTest, LoadsFashionMnist) {
  ASSERT_OK_AND_ASSIGN(Dataset train, LoadMnistFormat(kFashionMnist, Split::kTrain));
  EXPECT_EQ(train.num_examples, 60000);
  EXPECT_EQ(train.example_dim, 784);
  ASSERT_OK_AND_ASSIGN(Dataset test, LoadMnistFormat(kFashionMnist, Split::kTest));
  EXPECT_EQ(test.num_examples, 10000);
  std::vector<int> per_class(10, 0);
  for (int32_t y : test.labels) per_class[y]++;
  for (int c : per_class) EXPECT_EQ(c, 1000);  // the test set is balanced
  float max = 0;
  for (float v : test.features) max = std::max(max, v);
  EXPECT_FLOAT_EQ(max, 1.0f);
}

TEST(DatasetTest, MissingDirectoryNamesTheFile) {
  auto ds = LoadMnistFormat("/nonexistent", Split::kTest);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("/nonexistent/t10k-images-idx3-ubyte"),
            absl::string_view::npos);
}

Dataset Counting(int n) {
  Dataset ds;
  ds.num_examples = n;
  ds.example_dim = 1;
  for (int i = 0; i < n; ++i) {
    ds.features.push_back(i);
    ds.labels.push_back(i % 10);
  }
  return ds;
}

TEST(ShardIteratorTest, ShardsAreDisjointAndCoverEveryRecordEachEpoch) {
  Dataset ds = Counting(100);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int> seen;
    for (int r = 0; r < 3; ++r) {
      ShardIterator it(&ds, r, 3, 1, 42);
      EXPECT_EQ(it.shard_size(), r == 0 ? 34 : 33);
      for (int64_t i = 0; i < it.shard_size() * epoch; ++i) {  // skip earlier epochs
        float f;
        int32_t y;
        ASSERT_TRUE(it.Next(&f, &y).ok());
      }
      for (int64_t i = 0; i < it.shard_size(); ++i) {
        float f;
        int32_t y;
        EXPECT_EQ(*it.Next(&f, &y), epoch);
        EXPECT_TRUE(seen.insert(static_cast<int>(f)).second);
      }
    }
    EXPECT_EQ(seen.size(), 100u);
  }
}

TEST(ShardIteratorTest, ReplicaBatchesTogetherAreTheBatchOfOneLargerReplica) {
  Dataset ds = Counting(200);
  const int replicas = 3, batch = 4;
  ShardIterator whole(&ds, 0, 1, replicas * batch, 9);
  std::vector<std::unique_ptr<ShardIterator>> parts;
  for (int r = 0; r < replicas; ++r) {
    parts.push_back(std::make_unique<ShardIterator>(&ds, r, replicas, batch, 9));
  }
  // Two epochs: 16 steps of 12 examples each.
  for (int step = 0; step < 32; ++step) {
    std::vector<float> big(replicas * batch);
    std::vector<int32_t> y(replicas * batch);
    ASSERT_TRUE(whole.Next(big.data(), y.data()).ok());
    std::multiset<float> want(big.begin(), big.end()), got;
    for (int r = 0; r < replicas; ++r) {
      std::vector<float> small(batch);
      std::vector<int32_t> ys(batch);
      ASSERT_TRUE(parts[r]->Next(small.data(), ys.data()).ok());
      got.insert(small.begin(), small.end());
    }
    EXPECT_EQ(got, want) << "step " << step;
  }
}

TEST(ShardIteratorTest, ShuffleIsSeededAndChangesPerEpoch) {
  Dataset ds = Counting(64);
  auto epoch_order = [&](uint64_t seed, int epochs) {
    ShardIterator it(&ds, 0, 1, 8, seed);
    std::vector<float> out(64 * epochs);
    std::vector<int32_t> y(8);
    for (int b = 0; b < 8 * epochs; ++b) EXPECT_TRUE(it.Next(out.data() + 8 * b, y.data()).ok());
    return out;
  };
  auto a = epoch_order(7, 2), b = epoch_order(7, 2), c = epoch_order(8, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 64),
            std::vector<float>(a.begin() + 64, a.end()));
}

TEST(ShardIteratorTest, SkipLandsWhereNextWouldHave) {
  Dataset ds = Counting(50);
  ShardIterator walked(&ds, 1, 2, 4, 3), skipped(&ds, 1, 2, 4, 3);
  std::vector<float> a(4), b(4);
  std::vector<int32_t> y(4);
  for (int i = 0; i < 13; ++i)
    ASSERT_TRUE(walked.Next(a.data(), y.data()).ok());  // across two epochs
  ASSERT_TRUE(skipped.Seek(13).ok());
  EXPECT_EQ(*walked.Next(a.data(), y.data()), *skipped.Next(b.data(), y.data()));
  EXPECT_EQ(a, b);
}

TEST(ShardIteratorTest, DropsTheShortLastBatch) {
  Dataset ds = Counting(10);
  ShardIterator it(&ds, 0, 1, 4, 1);
  EXPECT_EQ(it.batches_per_epoch(), 2);
  float f[4];
  int32_t y[4];
  EXPECT_EQ(*it.Next(f, y), 0);
  EXPECT_EQ(*it.Next(f, y), 0);
  EXPECT_EQ(*it.Next(f, y), 1);
}

// A small data set on disk: `n` training examples of 2x2 pixels (example i
// holds i, i+1, i+2, i+3) and 3 test examples, written as one pair each.
std::string WriteSmallDataDir(const std::string& name, int n) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [prefix, count] : {std::make_pair("train", n), std::make_pair("t10k", 3)}) {
    IdxArray images{{count, 2, 2}, {}}, labels{{count}, {}};
    for (int i = 0; i < count; ++i) {
      for (int j = 0; j < 4; ++j) images.values.push_back(static_cast<uint8_t>(i + j));
      labels.values.push_back(static_cast<uint8_t>(i % 10));
    }
    EXPECT_OK(WriteIdxFile(dir + "/" + prefix + "-images-idx3-ubyte", images));
    EXPECT_OK(WriteIdxFile(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels));
  }
  return dir;
}

TEST(DatasetTest, ShardedCopyIsReadBackWholeAndByFile) {
  const std::string src = WriteSmallDataDir("sharded_src", 10);
  const std::string out = ::testing::TempDir() + "/sharded_out";
  std::filesystem::remove_all(out);
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> counts, WriteShardedCopy(src, out, 4));
  EXPECT_EQ(counts, (std::vector<int64_t>{2, 3, 2, 3}));
  ASSERT_OK_AND_ASSIGN(SplitFiles files, FindSplitFiles(out, Split::kTrain));
  ASSERT_EQ(files.images.size(), 4u);
  EXPECT_EQ(files.images[2], out + "/train-images-idx3-ubyte-00002-of-00004.gz");
  EXPECT_EQ(files.labels[3], out + "/train-labels-idx1-ubyte-00003-of-00004.gz");
  // All files together are the original, in order.
  ASSERT_OK_AND_ASSIGN(Dataset whole, LoadMnistFormat(out, Split::kTrain));
  ASSERT_OK_AND_ASSIGN(Dataset original, LoadMnistFormat(src, Split::kTrain));
  EXPECT_EQ(whole.num_examples, 10);
  EXPECT_EQ(whole.example_dim, 4);
  EXPECT_EQ(whole.features, original.features);
  EXPECT_EQ(whole.labels, original.labels);
  ASSERT_OK_AND_ASSIGN(Dataset test, LoadMnistFormat(out, Split::kTest));
  EXPECT_EQ(test.num_examples, 3);

  // 2 replicas, 4 files: replica 1 reads files 1 and 3 (examples 2-4, 7-9).
  ASSERT_OK_AND_ASSIGN(ReplicaData r1, LoadReplicaData(out, Split::kTrain, 1, 2));
  EXPECT_TRUE(r1.by_file);
  EXPECT_EQ(r1.files_read, 2);
  EXPECT_EQ(r1.files_total, 4);
  EXPECT_EQ(r1.split_examples, 10);
  EXPECT_EQ(r1.dataset.labels, (std::vector<int32_t>{2, 3, 4, 7, 8, 9}));
  // 5 replicas, 4 files: every file, sharded by record.
  ASSERT_OK_AND_ASSIGN(ReplicaData r4, LoadReplicaData(out, Split::kTrain, 4, 5));
  EXPECT_FALSE(r4.by_file);
  EXPECT_EQ(r4.files_read, 4);
  EXPECT_EQ(r4.dataset.num_examples, 10);
  EXPECT_EQ(r4.split_examples, 10);
  // One file (the original): by record whatever the replicas.
  ASSERT_OK_AND_ASSIGN(ReplicaData single, LoadReplicaData(src, Split::kTrain, 0, 1));
  EXPECT_FALSE(single.by_file);
  EXPECT_EQ(single.dataset.num_examples, 10);
}

TEST(DatasetTest, PixelsHeldAsBytesGiveTheSameBatchesBitForBit) {
  // The real training split, both ways: a quarter of the memory, and every
  // shuffled batch the same bits as from the floats.
  ASSERT_OK_AND_ASSIGN(ReplicaData floats, LoadReplicaData(kFashionMnist, Split::kTrain, 1, 3));
  ASSERT_OK_AND_ASSIGN(ReplicaData bytes, LoadReplicaData(kFashionMnist, Split::kTrain, 1, 3,
                                                          /*pixels_as_bytes=*/true));
  EXPECT_TRUE(bytes.dataset.features.empty());
  ASSERT_EQ(bytes.dataset.pixels.size(), size_t{60000} * 784);
  EXPECT_EQ(floats.dataset.features.size(), size_t{60000} * 784);
  EXPECT_EQ(bytes.dataset.labels, floats.dataset.labels);
  EXPECT_EQ(bytes.split_examples, floats.split_examples);
  std::vector<float> a(3 * 784), b(3 * 784);
  CopyFeatures(floats.dataset, 59997, 3, a.data());
  CopyFeatures(bytes.dataset, 59997, 3, b.data());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  ShardIterator from_floats(&floats.dataset, 1, 3, 32, 7), from_bytes(&bytes.dataset, 1, 3, 32, 7);
  std::vector<float> fa(32 * 784), fb(32 * 784);
  std::vector<int32_t> ya(32), yb(32);
  for (int step = 0; step < 700; ++step) {  // into the second epoch (625 batches each)
    ASSERT_OK_AND_ASSIGN(int64_t ea, from_floats.Next(fa.data(), ya.data()));
    ASSERT_OK_AND_ASSIGN(int64_t eb, from_bytes.Next(fb.data(), yb.data()));
    ASSERT_EQ(ea, eb);
    ASSERT_EQ(ya, yb) << "step " << step;
    ASSERT_EQ(std::memcmp(fa.data(), fb.data(), fa.size() * sizeof(float)), 0) << "step " << step;
  }
  // Every value is a pixel over 255, from 0 to 1.
  float max = 0;
  for (float v : fb) max = std::max(max, v);
  EXPECT_LE(max, 1.0f);
  EXPECT_GT(max, 0.5f);

  // Sharded by file: the bytes of the replica's files only, in order.
  const std::string src = WriteSmallDataDir("bytes_src", 10);
  const std::string out = ::testing::TempDir() + "/bytes_out";
  std::filesystem::remove_all(out);
  ASSERT_OK(WriteShardedCopy(src, out, 4).status());
  ASSERT_OK_AND_ASSIGN(ReplicaData r1, LoadReplicaData(out, Split::kTrain, 1, 2, true));
  EXPECT_TRUE(r1.by_file);
  EXPECT_EQ(r1.dataset.labels, (std::vector<int32_t>{2, 3, 4, 7, 8, 9}));
  ASSERT_EQ(r1.dataset.pixels.size(), 24u);
  EXPECT_EQ(r1.dataset.pixels[0], 2);    // example 2: 2, 3, 4, 5
  EXPECT_EQ(r1.dataset.pixels[23], 12);  // example 9: 9, 10, 11, 12
  float last[4];
  CopyFeatures(r1.dataset, 5, 1, last);
  EXPECT_EQ(last[0], 9 * (1.0f / 255.0f));
  EXPECT_EQ(last[3], 12 * (1.0f / 255.0f));
}

TEST(DatasetTest, ShardedFilesThatDoNotAddUpAreNamed) {
  const std::string src = WriteSmallDataDir("sharded_bad_src", 6);
  const std::string out = ::testing::TempDir() + "/sharded_bad";
  std::filesystem::remove_all(out);
  ASSERT_OK(WriteShardedCopy(src, out, 3).status());
  EXPECT_EQ(WriteShardedCopy(src, out, 2).status().message(),
            out +
                " already holds t10k-images-idx3-ubyte.gz: write the copy to a directory "
                "without data files");
  EXPECT_EQ(WriteShardedCopy(src, out + "2", 7).status().message(),
            "files=7: must be from 1 to 6 (the training examples, one at least per file)");
  std::filesystem::remove(out + "/train-labels-idx1-ubyte-00001-of-00003.gz");
  EXPECT_EQ(LoadMnistFormat(out, Split::kTrain).status().message(),
            out +
                "/train-labels-idx1-ubyte-00001-of-00003[.gz] is missing: the split has 3 "
                "files");
  std::filesystem::copy_file(src + "/train-images-idx3-ubyte", out + "/train-images-idx3-ubyte");
  EXPECT_EQ(LoadMnistFormat(out, Split::kTrain).status().message(),
            out + " holds both " + out +
                "/train-images-idx3-ubyte and 3 sharded "
                "train-images-idx3-ubyte-SSSSS-of-00003 files: keep one form");
}

TEST(IdxWriterTest, RoundTripsPlainAndGzipAndReadsDimsAlone) {
  const std::string dir = ::testing::TempDir();
  IdxArray a{{3, 2}, {1, 2, 3, 4, 5, 255}};
  for (const std::string name : {"/w.idx", "/w.idx.gz"}) {
    ASSERT_OK(WriteIdxFile(dir + name, a));
    ASSERT_OK_AND_ASSIGN(IdxArray back, ReadIdxFile(dir + name));
    EXPECT_EQ(back.dims, a.dims);
    EXPECT_EQ(back.values, a.values);
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> dims, ReadIdxDims(dir + name));
    EXPECT_EQ(dims, a.dims);
    EXPECT_FALSE(std::filesystem::exists(dir + name + ".tmp"));
  }
  EXPECT_EQ(WriteIdxFile(dir + "/bad.idx", IdxArray{{4}, {1, 2}}).message(),
            "IDX file " + dir + "/bad.idx: 2 values for dimensions of 4");
  EXPECT_EQ(WriteIdxFile(dir + "/no/such/dir.idx", a).message(),
            "cannot write IDX file " + dir + "/no/such/dir.idx: open: No such file or directory");
}

}  // namespace
}  // namespace pstrain::data
