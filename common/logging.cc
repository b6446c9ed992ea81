#include "common/logging.h"

#include <unistd.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain {
namespace {
// Written once by main before threads start, read-only afterwards.
std::string* g_tag = nullptr;
}  // namespace

void SetLogTag(absl::string_view tag) {
  delete g_tag;
  g_tag = new std::string(tag);
}

void LogLine(absl::string_view message) {
  std::string line = absl::FormatTime("%H:%M:%E3S", absl::Now(),
                                      absl::LocalTimeZone());
  absl::StrAppend(&line, " ", g_tag == nullptr ? "pstrain" : *g_tag, ": ",
                  message, "\n");
  // One write(2) keeps lines from different threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace pstrain
