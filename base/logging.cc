#include "base/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain {
namespace {
// Written once by main before threads start, read-only afterwards.
std::string* g_tag = nullptr;
int g_stream_fd = STDERR_FILENO;  // -1: none
int g_file_fd = -1;
}  // namespace

absl::Status SetLogDestination(LogStream stream, const std::string& file_path) {
  int file_fd = -1;
  if (!file_path.empty()) {
    file_fd = ::open(file_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (file_fd < 0) {
      const int e = errno;
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("cannot open log file ", file_path, ": ", std::strerror(e)));
    }
  }
  if (g_file_fd >= 0) ::close(g_file_fd);
  g_file_fd = file_fd;
  g_stream_fd = stream == LogStream::kStderr   ? STDERR_FILENO
                : stream == LogStream::kStdout ? STDOUT_FILENO
                                               : -1;
  return absl::OkStatus();
}

void SetLogTag(absl::string_view tag) {
  delete g_tag;
  g_tag = new std::string(tag);
}

void LogLine(absl::string_view message) {
  std::string line = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
  absl::StrAppend(&line, " ", g_tag == nullptr ? "pstrain" : *g_tag, ": ", message, "\n");
  // One write(2) keeps lines from different threads whole.
  for (int fd : {g_stream_fd, g_file_fd}) {
    if (fd < 0) continue;
    ssize_t ignored = ::write(fd, line.data(), line.size());
    (void)ignored;
  }
}

}  // namespace pstrain
