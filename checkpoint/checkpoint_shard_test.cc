#include "checkpoint/checkpoint_shard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain::ckpt {
namespace {

ShardContents Example() {
  ShardContents s;
  s.header.set_step(120);
  s.header.set_ps_index(1);
  s.header.set_num_ps(2);
  s.header.set_optimizer("adam");
  s.header.set_num_slots(2);
  v1::TensorCheckpoint dense;
  dense.set_key("w/part_1");
  dense.set_updates(120);
  dense.set_elements(3);
  const float values[9] = {1, 2, 3, 0.1f, 0.2f, 0.3f, 4, 5, 6};
  dense.set_data(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  s.tensors.push_back(dense);
  v1::TensorCheckpoint table;
  table.set_key("emb");
  table.set_embedding(true);
  table.set_dim(1);
  table.add_row_ids(42);
  table.add_row_updates(7);
  const float row[3] = {0.5f, 0.01f, 0.02f};
  table.set_data(std::string(reinterpret_cast<const char*>(row), sizeof(row)));
  s.tensors.push_back(table);
  return s;
}

TEST(CheckpointShardTest, WritesAtomicallyAndReadsBackEveryField) {
  const std::string dir = pstrain::testing::TempDir() + "/ckpt_rt";
  const std::string path = ShardPath(dir, 120, 1, 2);
  EXPECT_EQ(path, dir + "/ckpt-120/shard-1-of-2");
  ASSERT_OK_AND_ASSIGN(ShardWritten w, WriteShard(path, Example()));
  ASSERT_OK_AND_ASSIGN(std::string raw, ReadFile(path));
  EXPECT_EQ(w.bytes, static_cast<int64_t>(raw.size()));
  EXPECT_EQ(raw.substr(0, 8), "PSCKPT01");
  EXPECT_EQ(ReadFile(path + ".tmp").status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(ShardContents back, ReadShard(path));
  EXPECT_EQ(back.header.step(), 120);
  EXPECT_EQ(back.header.num_tensors(), 2);
  EXPECT_EQ(back.header.optimizer(), "adam");
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].SerializeAsString(), Example().tensors[0].SerializeAsString());
  EXPECT_EQ(back.tensors[1].SerializeAsString(), Example().tensors[1].SerializeAsString());
}

// A table's values and slots past 2 GiB in one record (2^24 rows of 32
// floats with Adam's two slots are 6 GiB) read back whole. The file is
// written by hand as WriteShard lays it out, with the record's middle left
// as a hole: 2 GiB on disk cost nothing, and the bytes at both ends of the
// data field say that it came back in place.
TEST(CheckpointShardTest, RecordsPastTwoGibReadBack) {
  const std::string dir = pstrain::testing::TempDir() + "/ckpt_big";
  const std::string path = ShardPath(dir, 9, 0, 1);
  ASSERT_OK(MakeDirs(dir + "/ckpt-9"));
  v1::ShardHeader header;
  header.set_step(9);
  header.set_num_ps(1);
  header.set_num_tensors(1);
  v1::TensorCheckpoint t;
  t.set_key("emb/embeddings");
  t.set_dim(8);
  t.add_row_ids(3);
  t.add_row_updates(1);
  const uint64_t data_size = (uint64_t{1} << 31) + 64;
  std::string head = t.SerializeAsString();
  head += static_cast<char>((v1::TensorCheckpoint::kDataFieldNumber << 3) | 2);
  for (uint64_t v = data_size;; v >>= 7) {
    head += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80) break;
  }
  const std::string first = "first bytes of the data field....";
  const std::string last = "....last bytes of the data field";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  auto put = [&](const std::string& bytes) {
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  };
  auto le = [](uint64_t v, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += static_cast<char>(v >> (8 * i));
    return out;
  };
  put("PSCKPT01");
  const std::string h = header.SerializeAsString();
  put(le(h.size(), 8) + h + le(MaskCrc32c(Crc32c(h.data(), h.size())), 4));
  // The tensor record: its CRC runs over the hole's zeros too.
  uint32_t crc = Crc32c(head.data(), head.size());
  crc = Crc32c(first.data(), first.size(), crc);
  const std::vector<char> zeros(1 << 20, 0);
  uint64_t hole = data_size - first.size() - last.size();
  for (uint64_t left = hole; left > 0;) {
    const size_t n = std::min<uint64_t>(left, zeros.size());
    crc = Crc32c(zeros.data(), n, crc);
    left -= n;
  }
  crc = Crc32c(last.data(), last.size(), crc);
  put(le(head.size() + data_size, 8) + head + first);
  ASSERT_GE(::lseek(fd, static_cast<off_t>(hole), SEEK_CUR), 0);
  put(last + le(MaskCrc32c(crc), 4));
  ASSERT_EQ(::close(fd), 0);

  ASSERT_OK_AND_ASSIGN(ShardContents back, ReadShard(path));
  EXPECT_EQ(back.header.step(), 9);
  ASSERT_EQ(back.tensors.size(), 1u);
  const v1::TensorCheckpoint& got = back.tensors[0];
  EXPECT_EQ(got.key(), "emb/embeddings");
  EXPECT_EQ(got.dim(), 8);
  ASSERT_EQ(got.row_ids_size(), 1);
  EXPECT_EQ(got.row_ids(0), 3);
  ASSERT_EQ(got.data().size(), data_size);
  EXPECT_EQ(got.data().substr(0, first.size()), first);
  EXPECT_EQ(got.data().substr(data_size - last.size()), last);
  EXPECT_EQ(got.data()[data_size / 2], '\0');
}

TEST(CheckpointShardTest, CorruptionIsNamedWithTheFileAndTheTensor) {
  const std::string dir = pstrain::testing::TempDir() + "/ckpt_bad";
  const std::string path = ShardPath(dir, 5, 0, 1);
  ASSERT_OK(WriteShard(path, Example()).status());
  ASSERT_OK_AND_ASSIGN(std::string raw, ReadFile(path));
  // Flip a byte inside the dense tensor's float data (the second record).
  std::string flipped = raw;
  const size_t at = raw.find(std::string("\x00\x00\x80\x3f", 4));  // 1.0f
  ASSERT_NE(at, std::string::npos);
  flipped[at + 1] ^= 0x40;
  ASSERT_OK(WriteFileAtomically(path, flipped));
  EXPECT_EQ(ReadShard(path).status().message(),
            "checkpoint shard " + path + ": tensor 0 (w/part_1): checksum mismatch");
  ASSERT_OK(WriteFileAtomically(path, raw.substr(0, raw.size() - 5)));
  EXPECT_EQ(ReadShard(path).status().message(),
            "checkpoint shard " + path + ": tensor 1: cut short");
  ASSERT_OK(WriteFileAtomically(path, "not a shard at all"));
  EXPECT_EQ(ReadShard(path).status().message(),
            "checkpoint shard " + path + ": not a checkpoint shard (bad magic)");
  EXPECT_EQ(ReadShard(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointShardTest, TableRecordsAreCheckedAgainstTheTableAndTheSlots) {
  const v1::TensorCheckpoint table = Example().tensors[1];  // dim 1, Adam
  EXPECT_OK(CheckTableRecord(table, 2, 1));
  auto lost = [](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    return std::string(s.message());
  };
  // Rows of another width: a table of another model, not damage.
  const absl::Status other = CheckTableRecord(table, 2, 4);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(), "table emb has rows of dim 1, not 4");
  EXPECT_EQ(lost(CheckTableRecord(table, 0, 1)),
            "table emb holds 12 bytes; its 1 rows of dim 1 with 0 optimizer slots take 4");
  v1::TensorCheckpoint counts = table;
  counts.add_row_updates(3);
  EXPECT_EQ(lost(CheckTableRecord(counts, 2, 1)), "table emb has 1 row ids but 2 update counts");
  v1::TensorCheckpoint cut = table;
  cut.mutable_data()->resize(8);
  EXPECT_EQ(lost(CheckTableRecord(cut, 2, 1)),
            "table emb holds 8 bytes; its 1 rows of dim 1 with 2 optimizer slots take 12");
}

}  // namespace
}  // namespace pstrain::ckpt
