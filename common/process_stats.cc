#include "common/process_stats.h"

#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_split.h"

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

absl::StatusOr<double> CpuSeconds(pid_t pid) {
  const std::string path =
      pid == 0 ? "/proc/self/stat" : absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  // Fields after the command name (which may hold spaces) start after ")".
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return absl::NotFoundError(absl::StrCat("bad ", path));
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  int64_t utime, stime;
  // utime and stime are fields 14 and 15; f[0] is field 3.
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::NotFoundError(absl::StrCat("bad ", path));
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

}  // namespace pstrain
