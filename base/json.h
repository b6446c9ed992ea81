// JSON values for TF_CONFIG, metrics files, the checkpoint index and
// `--json` output. The value type is nlohmann::json (Debian's
// nlohmann-json3-dev): integers keep their 64-bit precision (a step or an id
// above 2^53 reads back exactly), other numbers are doubles, and object
// members are kept in key order. What this header adds is the strict parser
// the rest of pstrain reads with: errors as a Status naming the byte
// offset and what was expected, duplicate keys and deep nesting refused.
// Values are plain data: not thread-safe to mutate, safe to read concurrently.
#ifndef PSTRAIN_BASE_JSON_H_
#define PSTRAIN_BASE_JSON_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

using Json = nlohmann::json;

// Nesting deeper than this is refused, bounding the work a hostile input
// can ask for.
inline constexpr int kMaxJsonDepth = 64;

// Parses one JSON document (RFC 8259). InvalidArgument on bad input, e.g.
// "expected a value at offset 11, found end of input", "expected end of
// input at offset 28, found 'x'", "duplicate key \"a\" in an object",
// "nesting deeper than 64 levels", or a number outside the double range.
absl::StatusOr<Json> ParseJson(absl::string_view text);

// The member `key` of `j`; nullptr when `j` is not an object or lacks it.
const Json* FindMember(const Json& j, absl::string_view key);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_JSON_H_
