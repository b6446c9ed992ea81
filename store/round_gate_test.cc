#include "store/round_gate.h"

#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

// A dense tensor of `n` floats under `mode` for `replicas` replicas.
void Make(StoredTensor& t, const std::string& mode, int replicas, int64_t n = 2) {
  t.key = "w/part_0";
  t.consistency = *ParseConsistency(mode);
  t.def.variable = "w";
  t.def.row_end = n;
  t.def.row_elements = 1;
  absl::MutexLock lock(&t.mu);
  t.data.assign(n, 0.0f);
  InitRoundsLocked(t, replicas);
}

TEST(RoundGateTest, SyncRoundSumsDistinctReplicasAndRefusesRepeatsAndPushesAhead) {
  StoredTensor t;
  Make(t, "sync", 3);
  absl::MutexLock lock(&t.mu);
  const float g[2] = {1, 2};
  ASSERT_OK_AND_ASSIGN(bool taken, AdmitPushLocked(t, 0, 1, 0));
  EXPECT_TRUE(taken);
  EXPECT_FALSE(AddToRoundLocked(t, {}, g, 1, 0, 2));
  EXPECT_EQ(AdmitPushLocked(t, 0, 1, 0).status().message(),
            "replica 1 already pushed version 0 of w/part_0");
  EXPECT_EQ(AdmitPushLocked(t, 1, 0, 0).status().message(),
            "sync push for version 1 of w/part_0 but it is at version 0: replica 0 did not "
            "wait for the step to complete");
  // Replica 1 pushed version 0: it waits for version 1, naming who is missing.
  std::string why;
  EXPECT_FALSE(ReadyLocked(t, {1, 0, 0}, 3, 2, &why));
  EXPECT_EQ(why,
            "w/part_0 is at step 0 and replica 1 needs step 1; 1 of 2 gradients are in, none "
            "yet from replicas 0, 2");
  // An observer never waits.
  EXPECT_TRUE(ReadyLocked(t, {-1, 5, 0}, 3, 2, &why));
  EXPECT_TRUE(AddToRoundLocked(t, {}, g, 2, 0, 2));
  EXPECT_EQ(t.accum, (std::vector<float>{2, 4}));
  ++t.updates;
  EXPECT_FALSE(FinishUpdateLocked(t, 2));
  EndRoundLocked(t);
  EXPECT_EQ(t.version.load(), 1);
  EXPECT_EQ(t.accum, (std::vector<float>{0, 0}));
  EXPECT_TRUE(ReadyLocked(t, {1, 0, 0}, 3, 2, &why));
  // A late gradient for version 0 is dropped, and so is one at the stop step.
  ASSERT_OK_AND_ASSIGN(taken, AdmitPushLocked(t, 0, 0, 0));
  EXPECT_FALSE(taken);
  ASSERT_OK_AND_ASSIGN(taken, AdmitPushLocked(t, 1, 0, 1));
  EXPECT_FALSE(taken);
  int64_t counted = 0;
  for (const auto& b : t.staleness) counted += b.load();
  DropStaleLocked(t, 0, 0);
  EXPECT_EQ(t.dropped_stale.load(), 1);
  // Not applied: not in the histogram of applied gradients' staleness.
  int64_t after = 0;
  for (const auto& b : t.staleness) after += b.load();
  EXPECT_EQ(after, counted);
  EXPECT_EQ(t.last_pushed[0], 0);
}

TEST(RoundGateTest, SspHoldsAReplicaMoreThanTheBoundAheadOfTheSlowest) {
  StoredTensor t;
  Make(t, "ssp:1", 2);
  absl::MutexLock lock(&t.mu);
  std::string why;
  for (int step = 1; step <= 2; ++step) {
    ++t.updates;
    EXPECT_TRUE(FinishUpdateLocked(t, 0));
  }
  EXPECT_EQ(t.min_clock.load(), 0);
  // Replica 0 is at clock 2, replica 1 at 0: a gap of 2 > 1.
  EXPECT_FALSE(ReadyLocked(t, {0, 0, 0}, 2, 2, &why));
  EXPECT_EQ(why,
            "replica 0 is at clock 2 of w/part_0 and may run at most 1 ahead of the slowest; "
            "replicas 1 are below clock 1");
  EXPECT_TRUE(ReadyLocked(t, {1, 0, 0}, 2, 2, &why));
  ++t.updates;
  FinishUpdateLocked(t, 1);
  EXPECT_TRUE(ReadyLocked(t, {0, 0, 0}, 2, 2, &why));
  EXPECT_EQ(t.min_clock.load(), 1);
  ResetRoundsLocked(t);
  EXPECT_EQ(t.clocks, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(t.min_clock.load(), 0);
}

TEST(RoundGateTest, AsyncTakesEveryPushAndNeverWaits) {
  StoredTensor t;
  Make(t, "async", 2);
  absl::MutexLock lock(&t.mu);
  ASSERT_OK_AND_ASSIGN(bool taken, AdmitPushLocked(t, 7, 1, 1));
  EXPECT_TRUE(taken);
  std::string why;
  EXPECT_TRUE(ReadyLocked(t, {0, 100, 0}, 2, 2, &why));
  t.updates = 5;
  CountPushLocked(t, 2, 1);  // 3 updates stale, from replica 1
  CountPushLocked(t, 5, 1);
  CountPushLocked(t, 5, 7);  // no such replica: counted, not per replica
  EXPECT_EQ(t.pushes.load(), 3);
  EXPECT_EQ(t.staleness[StalenessBucket(3)].load(), 1);
  EXPECT_EQ(t.replica_pushes, (std::vector<int64_t>{0, 2}));
}

}  // namespace
}  // namespace pstrain::ps
