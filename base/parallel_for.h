// Splits large element-wise work (optimizer steps, copies of MiB-sized
// tensors) across the cores this process may use: the caller runs one share
// and waits for helper threads to run the rest. A round trip over loopback
// leaves the other side's core idle while one side computes, so this
// shortens the critical path of every large push and pull.
#ifndef PSTRAIN_BASE_PARALLEL_FOR_H_
#define PSTRAIN_BASE_PARALLEL_FOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// A fixed set of helper threads, started by the constructor and joined by
// the destructor (which must not run while a For() is under way).
// Thread-safe: calls from several threads share the helpers, and each call
// waits only for its own shares. A caller that waits runs queued shares
// (its own or others') meanwhile, so For() may be called from inside a
// share without deadlock.
class ParallelPool {
 public:
  explicit ParallelPool(int helper_threads);
  ParallelPool(const ParallelPool&) = delete;
  ParallelPool& operator=(const ParallelPool&) = delete;
  ~ParallelPool() ABSL_LOCKS_EXCLUDED(mu_);

  int helper_threads() const { return static_cast<int>(threads_.size()); }

  // Runs fn(begin, end) over [0, n) in up to `max_shares` contiguous ranges
  // whose bounds are multiples of `grain` (except the last end), at most
  // one more than the helpers; returns when all are done. Runs inline when
  // n <= grain or there are no helpers.
  void For(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
           int max_shares = 64) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Task {
    std::function<void()> run;
    int* remaining;  // the posting call's count of shares not yet done
  };
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `task` unlocked, then counts it done.
  void Run(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// ParallelPool::For on the process's pool: one helper fewer than
// UsableCores() (base/cpu_limit.h), started on first use and joined at
// exit; a call after that runs inline.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                 int max_shares = 64);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_PARALLEL_FOR_H_
