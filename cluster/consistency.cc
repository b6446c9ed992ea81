#include "cluster/consistency.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

std::string Consistency::ToString() const {
  switch (mode) {
    case Mode::kAsync:
      return "async";
    case Mode::kSync:
      return "sync";
    case Mode::kSsp:
      return absl::StrCat("ssp:", staleness);
  }
  return "?";
}

absl::StatusOr<Consistency> ParseConsistency(absl::string_view text) {
  Consistency c;
  if (text == "async") return c;
  if (text == "sync") {
    c.mode = Consistency::Mode::kSync;
    return c;
  }
  if (absl::StartsWith(text, "ssp:")) {
    int64_t s = -1;
    if (absl::SimpleAtoi(text.substr(4), &s) && s >= 0 && s <= 1000000) {
      c.mode = Consistency::Mode::kSsp;
      c.staleness = s;
      return c;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "consistency \"", text,
      "\" is not one of async, sync, ssp:S (S an integer from 0 to 1000000)"));
}

}  // namespace pstrain
