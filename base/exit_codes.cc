#include "base/exit_codes.h"

#include "absl/strings/cord.h"

namespace pstrain {
namespace {

constexpr char kKindUrl[] = "type.pstrain/failure_kind";

bool Transient(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace

int ExitCodeOf(FailureKind kind) {
  switch (kind) {
    case FailureKind::kBadConfig:
      return kExitBadConfig;
    case FailureKind::kRetryable:
      return kExitRetryable;
    case FailureKind::kPermanent:
      break;
  }
  return kExitPermanent;
}

FailureKind FailureKindOfExitCode(int code) {
  if (code == kExitBadConfig) return FailureKind::kBadConfig;
  if (code >= 128) return FailureKind::kRetryable;
  return FailureKind::kPermanent;
}

absl::Status WithFailureKind(absl::Status s, FailureKind kind) {
  if (s.ok()) return s;
  const char* name = kind == FailureKind::kBadConfig   ? "bad_config"
                     : kind == FailureKind::kRetryable ? "retryable"
                                                       : "permanent";
  s.SetPayload(kKindUrl, absl::Cord(name));
  return s;
}

std::optional<FailureKind> FailureKindOf(const absl::Status& s) {
  absl::optional<absl::Cord> kind = s.GetPayload(kKindUrl);
  if (!kind.has_value()) return std::nullopt;
  if (*kind == "bad_config") return FailureKind::kBadConfig;
  if (*kind == "retryable") return FailureKind::kRetryable;
  return FailureKind::kPermanent;
}

absl::Status AsSetupFailure(absl::Status s) {
  if (s.ok() || Transient(s.code()) || FailureKindOf(s).has_value()) return s;
  return WithFailureKind(std::move(s), FailureKind::kBadConfig);
}

absl::Status WithRoleKind(absl::Status s, FailureKind unmarked) {
  const int code = RoleExitCode(s, unmarked);
  return WithFailureKind(std::move(s), FailureKindOfExitCode(code));
}

int RoleExitCode(const absl::Status& s, FailureKind unmarked) {
  if (s.ok()) return kExitOk;
  if (std::optional<FailureKind> kind = FailureKindOf(s)) return ExitCodeOf(*kind);
  if (Transient(s.code())) return kExitRetryable;
  return ExitCodeOf(unmarked);
}

int CommandExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return RoleExitCode(s, FailureKind::kBadConfig);
    default:
      return RoleExitCode(s, FailureKind::kPermanent);
  }
}

}  // namespace pstrain
