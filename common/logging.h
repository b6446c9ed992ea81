// Minimal logging to stderr: one line per message, prefixed with the local
// time and the process's task name (set once in main). Thread-safe: each line
// is written with a single write(2).
#ifndef PSTRAIN_COMMON_LOGGING_H_
#define PSTRAIN_COMMON_LOGGING_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Sets the tag printed on every line, e.g. "ps:0". Call once from main before
// any other thread starts.
void SetLogTag(absl::string_view tag);

// Writes "HH:MM:SS.mmm tag: message\n" to stderr.
void LogLine(absl::string_view message);

// Concatenates its arguments with absl::StrCat and logs the result.
template <typename... Args>
void Log(const Args&... args) {
  LogLine(absl::StrCat(args...));
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_LOGGING_H_
