#include "common/process_stats.h"

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pstrain {

absl::StatusOr<int64_t> ResidentBytes(pid_t pid) {
  const std::string path =
      pid == 0 ? "/proc/self/status" : absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kb;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kb)) return kb * 1024;
  }
  return absl::NotFoundError(absl::StrCat("no VmRSS line in ", path));
}

}  // namespace pstrain
