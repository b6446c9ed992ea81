// Splits large element-wise work (optimizer steps, copies of MiB-sized
// tensors) across the machine's cores: the caller runs one share and waits
// for helper threads to run the rest. A round trip over loopback leaves the
// other side's core idle while one side computes, so this shortens the
// critical path of every large push and pull.
// Thread-safe: calls from several threads share the helpers (each call
// waits only for its own shares).
#ifndef PSTRAIN_COMMON_PARALLEL_FOR_H_
#define PSTRAIN_COMMON_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace pstrain {

// Runs fn(begin, end) over [0, n) in up to `max_shares` contiguous ranges
// whose bounds are multiples of `grain` (except the last end), one per core
// at most; returns when all are done. Runs inline when n <= grain or the
// machine has one core.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                 int max_shares = 64);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PARALLEL_FOR_H_
