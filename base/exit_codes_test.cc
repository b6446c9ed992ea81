#include "base/exit_codes.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ExitCodesTest, AMarkedKindDecidesWhateverTheCode) {
  // A refusal the chief sent as FailedPrecondition, a data error as
  // Internal, a lost PS that answered InvalidArgument while restarting.
  const absl::Status refused =
      WithFailureKind(absl::FailedPreconditionError("refused"), FailureKind::kBadConfig);
  const absl::Status lost =
      WithFailureKind(absl::InvalidArgumentError("restarting"), FailureKind::kRetryable);
  const absl::Status bug = WithFailureKind(absl::UnavailableError("x"), FailureKind::kPermanent);
  EXPECT_EQ(FailureKindOf(refused), FailureKind::kBadConfig);
  EXPECT_EQ(FailureKindOf(absl::InternalError("x")), std::nullopt);
  for (FailureKind phase : {FailureKind::kBadConfig, FailureKind::kPermanent}) {
    EXPECT_EQ(RoleExitCode(refused, phase), 2);
    EXPECT_EQ(RoleExitCode(lost, phase), 138);
    EXPECT_EQ(RoleExitCode(bug, phase), 1);
  }
  EXPECT_EQ(CommandExitCode(lost), 138);
  // The message and code stay as they were.
  EXPECT_EQ(lost.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lost.message(), "restarting");
  EXPECT_TRUE(WithFailureKind(absl::OkStatus(), FailureKind::kPermanent).ok());
}

TEST(ExitCodesTest, UnmarkedFailuresTakeThePhasesKindButTransientCodesAreRetryable) {
  // A FailedPrecondition while training is no configuration error: it
  // exits 1 there, 2 before the task's work starts.
  const absl::Status precondition = absl::FailedPreconditionError("not yet");
  EXPECT_EQ(RoleExitCode(precondition, FailureKind::kPermanent), 1);
  EXPECT_EQ(RoleExitCode(precondition, FailureKind::kBadConfig), 2);
  for (const absl::Status& s : {absl::UnavailableError("x"), absl::DeadlineExceededError("x"),
                                absl::AbortedError("x"), absl::CancelledError("x")}) {
    EXPECT_EQ(RoleExitCode(s, FailureKind::kBadConfig), 138) << s;
    EXPECT_EQ(CommandExitCode(s), 138) << s;
  }
  EXPECT_EQ(RoleExitCode(absl::OkStatus(), FailureKind::kPermanent), 0);
  EXPECT_EQ(CommandExitCode(absl::InvalidArgumentError("--x")), 2);
  EXPECT_EQ(CommandExitCode(absl::NotFoundError("no file")), 2);
  EXPECT_EQ(CommandExitCode(absl::DataLossError("torn")), 1);
}

// A status marked with the kind its phase gives it keeps that code in any
// later phase: a data error while training stays 1 where a setup phase
// would call it 2; a transient one stays retryable; OK stays OK.
TEST(ExitCodesTest, WithRoleKindKeepsTheCodeThePhaseGave) {
  const absl::Status data = WithRoleKind(absl::DataLossError("torn"), FailureKind::kPermanent);
  EXPECT_EQ(data.message(), "torn");
  EXPECT_EQ(RoleExitCode(data, FailureKind::kBadConfig), 1);
  EXPECT_EQ(RoleExitCode(WithRoleKind(absl::UnavailableError("lost"), FailureKind::kBadConfig),
                         FailureKind::kPermanent),
            138);
  EXPECT_EQ(RoleExitCode(WithRoleKind(WithFailureKind(absl::InternalError("flag"),
                                                      FailureKind::kBadConfig),
                                      FailureKind::kPermanent),
                         FailureKind::kPermanent),
            2);
  EXPECT_TRUE(WithRoleKind(absl::OkStatus(), FailureKind::kPermanent).ok());
}

}  // namespace
}  // namespace pstrain
