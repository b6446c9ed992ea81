#include "store/wait_list.h"

#include <utility>
#include <vector>

namespace pstrain::ps {

WaitList::WaitList(const Clock* clock) : clock_(clock), timer_([this] { TimerLoop(); }) {}

WaitList::~WaitList() {
  std::list<Waiter> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(parked_);
  }
  timer_.join();
  for (Waiter& w : left) w.expire();
}

void WaitList::RunWhenReady(std::function<bool()> attempt, absl::Time deadline,
                            std::function<void()> expire) {
  TryOrPark(Waiter{std::move(attempt), deadline, std::move(expire)});
}

void WaitList::TryOrPark(Waiter w) {
  while (true) {
    const uint64_t seen = epoch_.load(std::memory_order_acquire);
    if (w.attempt()) return;
    if (clock_->Now() >= w.deadline) break;
    absl::MutexLock lock(&mu_);
    if (epoch_.load(std::memory_order_acquire) != seen) continue;  // raced: retry
    if (stopping_) break;
    parked_.push_back(std::move(w));
    return;
  }
  w.expire();
}

void WaitList::Notify() {
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  std::list<Waiter> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(parked_);
  }
  for (Waiter& w : batch) TryOrPark(std::move(w));
}

int WaitList::parked() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(parked_.size());
}

void WaitList::TimerLoop() {
  while (true) {
    std::vector<Waiter> due;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
      if (stopping_) return;
      const absl::Time now = clock_->Now();
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (it->deadline <= now) {
          due.push_back(std::move(*it));
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Waiter& w : due) w.expire();
  }
}

}  // namespace pstrain::ps
