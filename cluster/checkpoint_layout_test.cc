#include "cluster/checkpoint_layout.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Writes checkpoint `step` as a save would: `num_ps` shard files of
// `bytes` bytes each, then a MANIFEST listing them.
void WriteCheckpoint(const std::string& dir, int64_t step, int num_ps, int bytes) {
  std::filesystem::create_directories(CheckpointDir(dir, step));
  std::string shards;
  for (int i = 0; i < num_ps; ++i) {
    ASSERT_OK(WriteFileAtomically(ShardPath(dir, step, i, num_ps), std::string(bytes, 'x')));
    absl::StrAppend(&shards, i > 0 ? "," : "", "{\"file\":\"shard-", i, "-of-", num_ps,
                    "\",\"bytes\":", bytes, "}");
  }
  ASSERT_OK(WriteFileAtomically(ManifestPath(dir, step),
                                absl::StrCat("{\"step\":", step, ",\"shards\":[", shards, "]}\n")));
}

TEST(CompleteCheckpointsTest, ListsWholeCheckpointsNewestFirstAndSaysWhyOthersAreNot) {
  const std::string dir = pstrain::testing::TempDir() + "/complete";
  WriteCheckpoint(dir, 10, 2, 100);
  WriteCheckpoint(dir, 20, 3, 50);
  WriteCheckpoint(dir, 30, 2, 100);  // a shard cut short below
  ASSERT_OK(WriteFileAtomically(ShardPath(dir, 30, 1, 2), std::string(60, 'x')));
  WriteCheckpoint(dir, 40, 2, 100);  // a shard missing below
  ASSERT_EQ(std::remove(ShardPath(dir, 40, 0, 2).c_str()), 0);
  WriteCheckpoint(dir, 50, 1, 10);  // a save that never wrote its MANIFEST
  ASSERT_EQ(std::remove(ManifestPath(dir, 50).c_str()), 0);
  WriteCheckpoint(dir, 60, 1, 10);
  ASSERT_OK(WriteFileAtomically(ManifestPath(dir, 60), "{\"step\":60}\n"));
  std::vector<IncompleteCheckpoint> incomplete;
  const std::vector<CompleteCheckpoint> found = CompleteCheckpoints(dir, &incomplete);
  std::vector<int64_t> incomplete_steps;
  std::vector<std::string> skipped;
  for (const IncompleteCheckpoint& c : incomplete) {
    incomplete_steps.push_back(c.step);
    skipped.push_back(c.ToString());
  }
  EXPECT_EQ(incomplete_steps, (std::vector<int64_t>{60, 50, 40, 30}));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].step, 20);
  EXPECT_EQ(found[0].num_ps, 3);
  EXPECT_EQ(found[1].step, 10);
  EXPECT_EQ(found[1].num_ps, 2);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         absl::StrCat("checkpoint at step 60 is not complete: ",
                                      ManifestPath(dir, 60), ": no shard list"),
                         absl::StrCat("checkpoint at step 50 is not complete: ",
                                      ManifestPath(dir, 50), ": missing (the save did not finish)"),
                         absl::StrCat("checkpoint at step 40 is not complete: ",
                                      ShardPath(dir, 40, 0, 2), ": missing"),
                         absl::StrCat("checkpoint at step 30 is not complete: ",
                                      ShardPath(dir, 30, 1, 2),
                                      ": holds 60 bytes, the MANIFEST says 100"),
                     }));
  EXPECT_EQ(CompleteCheckpoints(dir + "/none", nullptr).size(), 0u);
}

TEST(CheckpointIndexTest, ReadsAStepAbove2To53Exactly) {
  const std::string dir = pstrain::testing::TempDir() + "/big_step";
  std::filesystem::create_directories(dir);
  const int64_t step = (int64_t{1} << 53) + 1;  // a double would read 2^53
  ASSERT_OK(WriteFileAtomically(CheckpointIndexPath(dir),
                                absl::StrCat("{\"step\":", step, ",\"final\":true}\n")));
  ASSERT_OK_AND_ASSIGN(CheckpointIndex index, ReadCheckpointIndex(dir));
  EXPECT_EQ(index.step, step);
  EXPECT_TRUE(index.final);
}

TEST(CheckpointIndexTest, AStepThatIsNotANonNegativeIntegerIsDataLoss) {
  const std::string dir = pstrain::testing::TempDir() + "/bad_step";
  std::filesystem::create_directories(dir);
  for (const char* text : {"{\"step\":1.5}", "{\"step\":-3}", "{\"step\":\"7\"}", "[7]"}) {
    ASSERT_OK(WriteFileAtomically(CheckpointIndexPath(dir), text));
    auto index = ReadCheckpointIndex(dir);
    EXPECT_EQ(index.status().code(), absl::StatusCode::kDataLoss) << text;
  }
}

}  // namespace
}  // namespace pstrain
