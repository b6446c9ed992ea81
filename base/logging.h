// Minimal logging: one line per message, prefixed with the local time and
// the process's task name (set once in main), to stderr unless main says
// otherwise (stdout, a file, or both). Thread-safe: each line is written
// with a single write(2) per destination.
#ifndef PSTRAIN_BASE_LOGGING_H_
#define PSTRAIN_BASE_LOGGING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Sets the tag printed on every line, e.g. "ps:0". Call once from main before
// any other thread starts.
void SetLogTag(absl::string_view tag);

// Where lines go besides a log file: the process's stderr (the default),
// its stdout, or nowhere (the file only).
enum class LogStream { kStderr, kStdout, kNone };

// Sends lines to `stream` and, when `file_path` is not empty, appends them
// to that file too (created 0644). Call once from main before any other
// thread starts. Errors: the file cannot be opened (its errno, naming it);
// nothing changes then.
absl::Status SetLogDestination(LogStream stream, const std::string& file_path);

// Writes "HH:MM:SS.mmm tag: message\n" where SetLogDestination says.
void LogLine(absl::string_view message);

// Concatenates its arguments with absl::StrCat and logs the result.
template <typename... Args>
void Log(const Args&... args) {
  LogLine(absl::StrCat(args...));
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_LOGGING_H_
