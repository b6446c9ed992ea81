#include "train/group_outcome.h"

#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace pstrain::train {

namespace {

// On the wire: "ok\n<value>", or "failed\n<exit code>\n<status code>\n<message>".
constexpr absl::string_view kOk = "ok\n";
constexpr absl::string_view kFailed = "failed\n";

// EncodeFailure's text, as DecodeFailure returns it; none when it does not parse.
std::optional<absl::Status> ParseFailure(const std::string& name, absl::string_view said) {
  // The exit code, then the status code, each on a line of its own.
  int numbers[2] = {0, 0};
  for (int& number : numbers) {
    const size_t newline = said.find('\n');
    if (newline == absl::string_view::npos || !absl::SimpleAtoi(said.substr(0, newline), &number)) {
      return std::nullopt;
    }
    said.remove_prefix(newline + 1);
  }
  const auto [code, status_code] = numbers;
  if (code <= 0 || status_code <= 0 ||
      status_code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return std::nullopt;
  }
  return WithFailureKind(absl::Status(static_cast<absl::StatusCode>(status_code),
                                      absl::StrCat(name, " failed: ", said)),
                         FailureKindOfExitCode(code));
}

}  // namespace

std::string EncodeFailure(const absl::Status& failure, FailureKind unmarked) {
  return absl::StrCat(RoleExitCode(failure, unmarked), "\n", static_cast<int>(failure.code()),
                      "\n", failure.message());
}

absl::Status DecodeFailure(const std::string& name, absl::string_view text) {
  std::optional<absl::Status> failure = ParseFailure(name, text);
  if (!failure.has_value()) {
    return absl::InternalError(absl::StrCat(name, " sent \"", text, "\" for its failure"));
  }
  return *failure;
}

absl::StatusOr<std::vector<std::string>> GatherOutcomes(const GatherFn& gather,
                                                        const std::vector<std::string>& names,
                                                        const absl::StatusOr<std::string>& mine,
                                                        FailureKind unmarked) {
  std::string sent;
  if (mine.ok()) {
    sent = absl::StrCat(kOk, *mine);
  } else {
    sent = absl::StrCat(kFailed, EncodeFailure(mine.status(), unmarked));
  }
  absl::StatusOr<std::vector<std::string>> all = gather(sent);
  if (!all.ok()) return all.status();
  if (all->size() != names.size()) {
    return absl::InternalError(absl::StrCat("the replicas' outcomes: ", all->size(),
                                            " answers for ", names.size(), " replicas"));
  }
  if (!mine.ok()) {
    return WithRoleKind(mine.status(), unmarked);
  }
  std::vector<std::string> values;
  values.reserve(all->size());
  for (size_t r = 0; r < all->size(); ++r) {
    absl::string_view said = (*all)[r];
    if (absl::ConsumePrefix(&said, kOk)) {
      values.emplace_back(said);
      continue;
    }
    std::optional<absl::Status> failure;
    if (absl::ConsumePrefix(&said, kFailed)) failure = ParseFailure(names[r], said);
    if (!failure.has_value()) {
      return absl::InternalError(
          absl::StrCat(names[r], " sent \"", (*all)[r], "\" for its outcome"));
    }
    return *failure;
  }
  return values;
}

}  // namespace pstrain::train
