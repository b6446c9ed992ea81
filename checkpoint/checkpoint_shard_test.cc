#include "checkpoint/checkpoint_shard.h"

#include <string>

#include "common/file_util.h"
#include "common/testing/status_testing.h"
#include "common/testing/temp_dir.h"
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
  EXPECT_EQ(lost(CheckTableRecord(table, 2, 4)), "table emb has rows of dim 1, not 4");
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
