#include "train/group_outcome.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/ring.h"
#include "transport/testing/loopback_ring.h"

namespace pstrain::train {
namespace {

using ::testing::ElementsAre;

const std::vector<std::string> kNames = {"worker:0", "worker:1", "worker:2"};

// Each replica's GatherOutcomes over a real ring of three, replica r
// passing outcome(r).
std::vector<absl::StatusOr<std::vector<std::string>>> OverRing(
    const std::function<absl::StatusOr<std::string>(int)>& outcome, FailureKind unmarked) {
  std::vector<absl::StatusOr<std::vector<std::string>>> got(3, absl::UnknownError("not run"));
  testing::OnLoopbackRing(3, nullptr, [&](int r, Ring& ring) {
    GatherFn gather = [&ring](const std::string& mine) { return ring.AllGather(mine); };
    got[r] = GatherOutcomes(gather, kNames, outcome(r), unmarked);
  });
  return got;
}

TEST(GatherOutcomesTest, EveryReplicaGetsEveryValueWhenAllSucceeded) {
  auto got = OverRing([](int r) { return absl::StrCat(10 + r); }, FailureKind::kBadConfig);
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK(got[r].status()) << r;
    EXPECT_THAT(*got[r], ElementsAre("10", "11", "12"));
  }
}

TEST(GatherOutcomesTest, OneReplicasFailureEndsEveryReplicaWithItsCode) {
  auto got = OverRing(
      [](int r) -> absl::StatusOr<std::string> {
        if (r == 1) return absl::DataLossError("train.gz at byte 25511257: truncated");
        return std::string("937");
      },
      FailureKind::kBadConfig);
  // The replica that failed: its own failure, the phase's kind (a launch: 2).
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(got[1].status().message(), "train.gz at byte 25511257: truncated");
  EXPECT_EQ(RoleExitCode(got[1].status(), FailureKind::kPermanent), kExitBadConfig);
  // The others: that replica's failure, named, with the same code.
  for (int r : {0, 2}) {
    EXPECT_EQ(got[r].status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(got[r].status().message(), "worker:1 failed: train.gz at byte 25511257: truncated");
    EXPECT_EQ(RoleExitCode(got[r].status(), FailureKind::kPermanent), kExitBadConfig) << r;
  }
}

TEST(GatherOutcomesTest, AFailureKeepsTheKindItCarriesAndTheFirstByReplicaIsTheJobs) {
  auto got = OverRing(
      [](int r) -> absl::StatusOr<std::string> {
        if (r == 1) {
          return WithFailureKind(absl::InternalError("a bug\nover two lines"),
                                 FailureKind::kPermanent);
        }
        if (r == 2) return absl::NotFoundError("no such file");
        return std::string("ok");
      },
      FailureKind::kBadConfig);
  EXPECT_EQ(got[0].status().message(), "worker:1 failed: a bug\nover two lines");
  EXPECT_EQ(RoleExitCode(got[0].status(), FailureKind::kBadConfig), kExitPermanent);
  EXPECT_EQ(RoleExitCode(got[1].status(), FailureKind::kBadConfig), kExitPermanent);
  // A replica that failed itself ends with its own failure and code.
  EXPECT_EQ(got[2].status().message(), "no such file");
  EXPECT_EQ(RoleExitCode(got[2].status(), FailureKind::kPermanent), kExitBadConfig);
}

TEST(GatherOutcomesTest, ATransientFailureStaysRetryableOnEveryReplica) {
  auto got = OverRing(
      [](int r) -> absl::StatusOr<std::string> {
        if (r == 0) return absl::UnavailableError("the file server did not answer");
        return std::string("1");
      },
      FailureKind::kBadConfig);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(RoleExitCode(got[r].status(), FailureKind::kBadConfig), kExitRetryable) << r;
  }
  EXPECT_EQ(got[2].status().message(), "worker:0 failed: the file server did not answer");
}

TEST(GatherOutcomesTest, AGatherThatFailsIsReturnedAsItIs) {
  GatherFn broken = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    return absl::UnavailableError("ring: receiving from worker:2: closed");
  };
  auto got = GatherOutcomes(broken, kNames, std::string("1"), FailureKind::kBadConfig);
  EXPECT_EQ(got.status(), absl::UnavailableError("ring: receiving from worker:2: closed"));
  GatherFn garbled = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    return std::vector<std::string>{"ok\n1", "what", "ok\n1"};
  };
  got = GatherOutcomes(garbled, kNames, std::string("1"), FailureKind::kBadConfig);
  EXPECT_EQ(got.status(), absl::InternalError("worker:1 sent \"what\" for its outcome"));
  GatherFn no_status = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    return std::vector<std::string>{"ok\n1", "ok\n1", "failed\n2\nbad"};
  };
  got = GatherOutcomes(no_status, kNames, std::string("1"), FailureKind::kBadConfig);
  EXPECT_EQ(got.status().message(), "worker:2 sent \"failed\n2\nbad\" for its outcome");
}

// A failure told outside an exchange (announced around the ring) carries
// what the replica told would end with: its code (its mark, or the kind
// given for an unmarked status; a transient code stays retryable), its
// status code and its message, multi-line messages whole.
TEST(FailureTextTest, WhatIsToldEndsTheReplicaToldWithTheSameCode) {
  const absl::Status data_loss = absl::DataLossError("train-0.csv line 12:\ncolumn \"x0\" is \"oops\"");
  absl::Status told = DecodeFailure("worker:1", EncodeFailure(data_loss, FailureKind::kPermanent));
  EXPECT_EQ(told.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(told.message(), "worker:1 failed: train-0.csv line 12:\ncolumn \"x0\" is \"oops\"");
  EXPECT_EQ(RoleExitCode(told, FailureKind::kRetryable), kExitPermanent);
  told = DecodeFailure("chief:0", EncodeFailure(WithFailureKind(absl::InternalError("bad flag"),
                                                                FailureKind::kBadConfig),
                                                FailureKind::kPermanent));
  EXPECT_EQ(RoleExitCode(told, FailureKind::kPermanent), kExitBadConfig);
  told = DecodeFailure("worker:0", EncodeFailure(absl::UnavailableError("lost"),
                                                 FailureKind::kPermanent));
  EXPECT_EQ(RoleExitCode(told, FailureKind::kPermanent), kExitRetryable);
  EXPECT_EQ(DecodeFailure("worker:2", "1\nnine\nbad"),
            absl::InternalError("worker:2 sent \"1\nnine\nbad\" for its failure"));
}

}  // namespace
}  // namespace pstrain::train
