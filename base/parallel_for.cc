#include "base/parallel_for.h"

#include <algorithm>
#include <memory>

#include "base/cpu_limit.h"

namespace pstrain {

ParallelPool::ParallelPool(int helper_threads) {
  for (int i = 0; i < helper_threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ParallelPool::~ParallelPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ParallelPool::Run(Task task) {
  mu_.Unlock();
  task.run();
  mu_.Lock();
  --*task.remaining;
}

void ParallelPool::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](ParallelPool* p)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->tasks_.empty(); },
        this));
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    Run(std::move(task));
  }
}

void ParallelPool::For(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                       int max_shares) {
  if (n <= 0) return;
  const int64_t grains = (n + grain - 1) / grain;
  const int shares =
      static_cast<int>(std::min<int64_t>({grains, helper_threads() + 1, std::max(max_shares, 1)}));
  if (shares <= 1) {
    fn(0, n);
    return;
  }
  const int64_t per = (grains + shares - 1) / shares * grain;
  int remaining = shares - 1;
  {
    absl::MutexLock lock(&mu_);
    for (int s = 1; s < shares; ++s) {
      const int64_t begin = s * per, end = std::min(n, begin + per);
      tasks_.push_back(Task{[&fn, begin, end] {
                              if (begin < end) fn(begin, end);
                            },
                            &remaining});
    }
  }
  fn(0, std::min(n, per));
  // Wait for this call's shares, running queued ones meanwhile: a share
  // that calls For() itself then never waits on shares nobody will run.
  absl::MutexLock lock(&mu_);
  while (remaining > 0) {
    struct Ready {
      ParallelPool* pool;
      int* remaining;
    } ready{this, &remaining};
    mu_.Await(absl::Condition(
        +[](Ready* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->pool->mu_) {
          return *r->remaining == 0 || !r->pool->tasks_.empty();
        },
        &ready));
    if (remaining == 0) break;
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    Run(std::move(task));
  }
}

namespace {

// The process's pool. Callers hold a reference for the length of a call;
// at exit the reaper drops the global one, and the pool is joined when the
// last call ends (a call on a helper thread never holds the last one: the
// call that posted its share holds one until that share is done).
ABSL_CONST_INIT absl::Mutex default_mu(absl::kConstInit);
std::shared_ptr<ParallelPool>* default_pool ABSL_GUARDED_BY(default_mu) = nullptr;
bool default_pool_gone ABSL_GUARDED_BY(default_mu) = false;

struct DefaultPoolReaper {
  ~DefaultPoolReaper() {
    std::shared_ptr<ParallelPool>* pool;
    {
      absl::MutexLock lock(&default_mu);
      pool = default_pool;
      default_pool = nullptr;
      default_pool_gone = true;
    }
    delete pool;
  }
};
DefaultPoolReaper reaper;

std::shared_ptr<ParallelPool> DefaultPool() {
  absl::MutexLock lock(&default_mu);
  if (default_pool_gone) return nullptr;
  if (default_pool == nullptr) {
    default_pool =
        new std::shared_ptr<ParallelPool>(std::make_shared<ParallelPool>(UsableCores() - 1));
  }
  return *default_pool;
}

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                 int max_shares) {
  if (n <= grain) {
    if (n > 0) fn(0, n);
    return;
  }
  if (std::shared_ptr<ParallelPool> pool = DefaultPool()) {
    pool->For(n, grain, fn, max_shares);
  } else {
    fn(0, n);
  }
}

}  // namespace pstrain
