#include "train/group_outcome.h"

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

}  // namespace

absl::StatusOr<std::vector<std::string>> GatherOutcomes(const GatherFn& gather,
                                                        const std::vector<std::string>& names,
                                                        const absl::StatusOr<std::string>& mine,
                                                        FailureKind unmarked) {
  int my_code = kExitOk;
  std::string sent;
  if (mine.ok()) {
    sent = absl::StrCat(kOk, *mine);
  } else {
    my_code = RoleExitCode(mine.status(), unmarked);
    sent = absl::StrCat(kFailed, my_code, "\n", static_cast<int>(mine.status().code()), "\n",
                        mine.status().message());
  }
  absl::StatusOr<std::vector<std::string>> all = gather(sent);
  if (!all.ok()) return all.status();
  if (all->size() != names.size()) {
    return absl::InternalError(absl::StrCat("the replicas' outcomes: ", all->size(),
                                            " answers for ", names.size(), " replicas"));
  }
  if (!mine.ok()) {
    return WithFailureKind(mine.status(), FailureKindOfExitCode(my_code));
  }
  std::vector<std::string> values;
  values.reserve(all->size());
  for (size_t r = 0; r < all->size(); ++r) {
    absl::string_view said = (*all)[r];
    if (absl::ConsumePrefix(&said, kOk)) {
      values.emplace_back(said);
      continue;
    }
    // The exit code, then the status code, each on a line of its own.
    int numbers[2] = {0, 0};
    bool parsed = absl::ConsumePrefix(&said, kFailed);
    for (int& number : numbers) {
      const size_t newline = said.find('\n');
      parsed = parsed && newline != absl::string_view::npos &&
               absl::SimpleAtoi(said.substr(0, newline), &number);
      if (parsed) said.remove_prefix(newline + 1);
    }
    const auto [code, status_code] = numbers;
    if (!parsed || code <= 0 || status_code <= 0 ||
        status_code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return absl::InternalError(
          absl::StrCat(names[r], " sent \"", (*all)[r], "\" for its outcome"));
    }
    return WithFailureKind(absl::Status(static_cast<absl::StatusCode>(status_code),
                                        absl::StrCat(names[r], " failed: ", said)),
                           FailureKindOfExitCode(code));
  }
  return values;
}

}  // namespace pstrain::train
