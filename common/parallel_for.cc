#include "common/parallel_for.h"

#include <algorithm>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {
namespace {

// Helper threads, started on first use and never stopped (they sleep when
// idle). One fewer than the cores: the caller is the last one.
class Helpers {
 public:
  static Helpers& Get() {
    static Helpers* helpers = new Helpers;
    return *helpers;
  }
  int count() const { return static_cast<int>(threads_.size()); }
  void Post(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

 private:
  Helpers() {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i + 1 < cores; ++i) {
      threads_.emplace_back([this] { Loop(); });
      threads_.back().detach();
    }
  }
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](std::deque<std::function<void()>>* q) { return !q->empty(); }, &tasks_));
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                 int max_shares) {
  if (n <= 0) return;
  Helpers& helpers = Helpers::Get();
  const int64_t grains = (n + grain - 1) / grain;
  const int shares = static_cast<int>(
      std::min<int64_t>({grains, helpers.count() + 1, std::max(max_shares, 1)}));
  if (shares <= 1) {
    fn(0, n);
    return;
  }
  const int64_t per = (grains + shares - 1) / shares * grain;
  absl::BlockingCounter done(shares - 1);
  for (int s = 1; s < shares; ++s) {
    const int64_t begin = s * per, end = std::min(n, begin + per);
    helpers.Post([&fn, &done, begin, end] {
      if (begin < end) fn(begin, end);
      done.DecrementCount();
    });
  }
  fn(0, std::min(n, per));
  done.Wait();
}

}  // namespace pstrain
