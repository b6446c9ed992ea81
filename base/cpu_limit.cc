#include "base/cpu_limit.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_util.h"

namespace pstrain {
namespace {

// quota / period in cores, rounded up; nullopt for "max", -1 or bad text.
std::optional<int> CoresOf(absl::string_view quota_text, absl::string_view period_text) {
  int64_t quota = 0, period = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota_text), &quota) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(period_text), &period) || quota <= 0 ||
      period <= 0) {
    return std::nullopt;
  }
  return static_cast<int>(std::max<int64_t>(1, (quota + period - 1) / period));
}

// "cpu.max" of cgroup v2: "<quota|max> <period>".
std::optional<int> V2Cores(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadFile(dir + "/cpu.max");
  if (!text.ok()) return std::nullopt;
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ', absl::SkipEmpty());
  if (parts.size() != 2) return std::nullopt;
  return CoresOf(parts[0], parts[1]);
}

std::optional<int> V1Cores(const std::string& dir) {
  absl::StatusOr<std::string> quota = ReadFile(dir + "/cpu.cfs_quota_us");
  absl::StatusOr<std::string> period = ReadFile(dir + "/cpu.cfs_period_us");
  if (!quota.ok() || !period.ok()) return std::nullopt;
  return CoresOf(*quota, *period);
}

// The tightest of `cores` over `path` and its ancestors under `mount`.
template <typename Read>
std::optional<int> Tightest(const std::string& mount, std::string path, Read read) {
  std::optional<int> best;
  while (true) {
    if (std::optional<int> c = read(mount + path); c && (!best || *c < *best)) best = c;
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = path.substr(0, slash == std::string::npos ? 0 : slash);
  }
  return best;
}

std::optional<int> Min(std::optional<int> a, std::optional<int> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace

std::optional<int> CgroupCpuQuotaCores(const std::string& proc_self_cgroup,
                                       const std::string& cgroup_root) {
  std::optional<int> cores;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    // "<id>:<controllers>:<path>"; v2 is "0::<path>".
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2][0] != '/') continue;
    std::string path = f[2] == "/" ? "" : f[2];
    if (f[0] == "0" && f[1].empty()) {
      cores = Min(cores, Tightest(cgroup_root, path, V2Cores));
      continue;
    }
    const std::vector<absl::string_view> controllers = absl::StrSplit(f[1], ',');
    if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
    // Mounted under the controllers' joint name ("cpu,cpuacct") or as "cpu".
    cores = Min(cores, Tightest(cgroup_root + "/" + f[1], path, V1Cores));
    if (f[1] != "cpu") cores = Min(cores, Tightest(cgroup_root + "/cpu", path, V1Cores));
  }
  return cores;
}

int UsableCores() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  const std::string cgroup = ReadFile("/proc/self/cgroup").value_or("");
  if (std::optional<int> quota = CgroupCpuQuotaCores(cgroup, "/sys/fs/cgroup")) {
    cores = std::min(cores, *quota);
  }
  return cores;
}

}  // namespace pstrain
