#include "base/json.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pstrain {
namespace {

// Thrown from the parser callback to stop at a refused document.
struct Refused {
  std::string message;
};

// nlohmann names what it expected in its own words; these read as ours.
std::string Expected(absl::string_view what) {
  if (what == "'[', '{', or a literal") return "a value";
  if (what == "string literal") return "a string";
  return std::string(what);
}

// "expected X at offset N, found F" (or "R at offset N" for an error that
// expected nothing in particular) from nlohmann's "... parse error at line
// L, column C: syntax error while parsing CONTEXT - R[; last read: '...'][;
// expected X]". `byte` counts from 1.
std::string Describe(absl::string_view text, const nlohmann::json::parse_error& e) {
  const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
  absl::string_view what = e.what();
  const size_t dash = what.find(" - ");
  absl::string_view detail = dash == absl::string_view::npos ? what : what.substr(dash + 3);
  std::string reason, expected;
  for (absl::string_view part : absl::StrSplit(detail, "; ")) {
    if (absl::StartsWith(part, "expected ")) {
      expected = Expected(part.substr(9));
    } else if (!absl::StartsWith(part, "last read: ") && reason.empty()) {
      reason = std::string(part);
    }
  }
  if (expected.empty()) return absl::StrCat(reason, " at offset ", offset);
  const std::string found = offset < text.size()
                                ? absl::StrCat("'", text.substr(offset, 1), "'")
                                : std::string("end of input");
  return absl::StrCat("expected ", expected, " at offset ", offset, ", found ", found);
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  // The keys seen so far in each object being read, innermost last.
  std::vector<absl::flat_hash_set<std::string>> keys;
  auto check = [&keys](int depth, nlohmann::json::parse_event_t event, Json& value) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= kMaxJsonDepth) {
          throw Refused{absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels")};
        }
        if (event == Event::object_start) keys.emplace_back();
        break;
      case Event::object_end:
        keys.pop_back();
        break;
      case Event::key:
        if (!keys.back().insert(value.get<std::string>()).second) {
          throw Refused{
              absl::StrCat("duplicate key \"", value.get<std::string>(), "\" in an object")};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const Refused& r) {
    return absl::InvalidArgumentError(r.message);
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(Describe(text, e));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double, for one.
    absl::string_view what = e.what();
    const size_t end = what.find("] ");
    return absl::InvalidArgumentError(
        std::string(end == absl::string_view::npos ? what : what.substr(end + 2)));
  }
}

const Json* FindMember(const Json& j, absl::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace pstrain
