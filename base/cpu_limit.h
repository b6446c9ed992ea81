// How many cores this process may keep busy: the CPUs its affinity mask
// allows, capped by the CPU quota of the cgroup it runs in (a container's
// `--cpus` or a Kubernetes CPU limit). cgroup v2 (`cpu.max`) and v1
// (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) are both read, at the
// process's own cgroup and each ancestor up to the hierarchy's root; the
// tightest quota wins, rounded up to whole cores. Files that are missing or
// unreadable mean "no limit". Thread-safe (no shared state).
#ifndef PSTRAIN_BASE_CPU_LIMIT_H_
#define PSTRAIN_BASE_CPU_LIMIT_H_

#include <optional>
#include <string>

namespace pstrain {

// Cores the quota allows (at least 1), or nullopt when no quota applies.
// `proc_self_cgroup` is the text of /proc/self/cgroup; `cgroup_root` is where
// the cgroup file systems are mounted (/sys/fs/cgroup), with v1 controllers
// in subfolders named as /proc/self/cgroup lists them ("cpu,cpuacct") or
// "cpu".
std::optional<int> CgroupCpuQuotaCores(const std::string& proc_self_cgroup,
                                       const std::string& cgroup_root);

// min(affinity CPUs, cgroup quota) for this process; at least 1.
int UsableCores();

}  // namespace pstrain

#endif  // PSTRAIN_BASE_CPU_LIMIT_H_
