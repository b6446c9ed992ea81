#include "client/round_queue.h"

#include <algorithm>
#include <utility>

namespace pstrain::client {

RoundQueue::RoundQueue() : thread_([this] { Loop(); }) {}

RoundQueue::~RoundQueue() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  thread_.join();
}

int64_t RoundQueue::Enqueue(Round round) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(round));
  return ++queued_;
}

absl::StatusOr<int64_t> RoundQueue::WaitFor(int64_t number) {
  absl::MutexLock lock(&mu_);
  auto done = [this, number]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ >= number || !error_.ok();
  };
  mu_.Await(absl::Condition(&done));
  if (!error_.ok()) return error_;
  return max_step_;
}

absl::Status RoundQueue::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= queued_; };
  mu_.Await(absl::Condition(&idle));
  return std::exchange(error_, absl::OkStatus());
}

void RoundQueue::Loop() {
  while (true) {
    Round round;
    bool skip = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return quit_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      round = std::move(queue_.front());
      queue_.pop_front();
      skip = !error_.ok();
    }
    absl::StatusOr<int64_t> r = skip ? absl::StatusOr<int64_t>(int64_t{0}) : round();
    absl::MutexLock lock(&mu_);
    if (!r.ok() && error_.ok()) error_ = r.status();
    if (r.ok()) max_step_ = std::max(max_step_, *r);
    ++finished_;
  }
}

}  // namespace pstrain::client
