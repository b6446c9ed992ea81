#include "base/process_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pstrain {

absl::StatusOr<int64_t> ResidentBytes(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/status" : absl::StrCat("/proc/", pid, "/status");
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

namespace {

// The fields of /proc/PID/stat from the third (the state) on: the command
// name before them may hold spaces, so they start after its ")".
absl::StatusOr<std::vector<std::string>> StatFields(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) {
    return absl::NotFoundError(absl::StrCat("bad ", path));
  }
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  if (f.size() < 13) return absl::NotFoundError(absl::StrCat("bad ", path));
  return f;
}

}  // namespace

absl::StatusOr<double> CpuSeconds(pid_t pid) {
  absl::StatusOr<std::vector<std::string>> f = StatFields(pid);
  if (!f.ok()) return f.status();
  int64_t utime, stime;
  // utime and stime are fields 14 and 15; f[0] is field 3.
  if (!absl::SimpleAtoi((*f)[11], &utime) || !absl::SimpleAtoi((*f)[12], &stime)) {
    return absl::NotFoundError(absl::StrCat("bad stat of pid ", pid));
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

absl::StatusOr<int> ThreadCount(pid_t pid) {
  absl::StatusOr<std::vector<std::string>> f = StatFields(pid);
  if (!f.ok()) return f.status();
  int threads;
  // num_threads is field 20.
  if (f->size() < 18 || !absl::SimpleAtoi((*f)[17], &threads)) {
    return absl::NotFoundError(absl::StrCat("bad stat of pid ", pid));
  }
  return threads;
}

absl::StatusOr<int64_t> MinorFaults(pid_t pid) {
  absl::StatusOr<std::vector<std::string>> f = StatFields(pid);
  if (!f.ok()) return f.status();
  int64_t minflt;
  // minflt is field 10.
  if (!absl::SimpleAtoi((*f)[7], &minflt)) {
    return absl::NotFoundError(absl::StrCat("bad stat of pid ", pid));
  }
  return minflt;
}

absl::StatusOr<int> TcpConnectionsTo(const std::vector<int>& ports) {
  // This process's sockets, by inode.
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    absl::string_view t = target;
    if (!link_ec && absl::ConsumePrefix(&t, "socket:[") && absl::ConsumeSuffix(&t, "]")) {
      inodes.insert(std::string(t));
    }
  }
  if (ec) return absl::NotFoundError("cannot list /proc/self/fd");
  const std::set<long> wanted(ports.begin(), ports.end());
  int count = 0;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // "sl local_address rem_address st tx_queue:rx_queue tr tm->when
      // retrnsmt uid timeout inode ...": addresses as HEX:PORT in hex.
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 10 || f[3] != "01") continue;  // 01: established
      const size_t colon = f[2].rfind(':');
      if (colon == std::string::npos) continue;
      char* end = nullptr;
      const long port = std::strtol(f[2].c_str() + colon + 1, &end, 16);
      if (end == f[2].c_str() + colon + 1) continue;
      if (wanted.count(port) > 0 && inodes.count(f[9]) > 0) ++count;
    }
  }
  return count;
}

}  // namespace pstrain
