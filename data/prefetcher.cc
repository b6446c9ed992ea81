#include "data/prefetcher.h"

#include <cstring>

namespace pstrain::data {

Prefetcher::Prefetcher(BatchSource* source, int depth, bool with_ids)
    : source_(source), slots_(depth) {
  const size_t batch = static_cast<size_t>(source->batch_size());
  for (Slot& s : slots_) {
    s.features.resize(batch * source->example_dim());
    s.ids.resize(with_ids ? batch * source->ids_dim() : 0);
    s.labels.resize(batch);
  }
  thread_ = std::thread([this] { Produce(); });
}

Prefetcher::~Prefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Prefetcher::Produce() {
  const int64_t depth = static_cast<int64_t>(slots_.size());
  while (true) {
    int64_t next;
    {
      absl::MutexLock lock(&mu_);
      auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || produced_ - consumed_ < depth;
      };
      mu_.Await(absl::Condition(&room));
      if (stop_) return;
      next = produced_;
    }
    // The slot is ours until produced_ moves past it.
    Slot& s = slots_[next % depth];
    s.epoch =
        source_->Next(s.features.data(), s.labels.data(), s.ids.empty() ? nullptr : s.ids.data());
    absl::MutexLock lock(&mu_);
    ++produced_;
    // After an error the source is done: its slot stays for Next to repeat.
    if (!s.epoch.ok()) return;
  }
}

absl::StatusOr<int64_t> Prefetcher::Next(float* features, int32_t* labels, int64_t* ids) {
  const int64_t depth = static_cast<int64_t>(slots_.size());
  int64_t index;
  {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return produced_ > consumed_; };
    if (!ready()) {
      const absl::Time start = absl::Now();
      mu_.Await(absl::Condition(&ready));
      waited_ += absl::Now() - start;
    }
    index = consumed_;
  }
  // The slot is ours until consumed_ moves past it.
  const Slot& s = slots_[index % depth];
  if (!s.epoch.ok()) return s.epoch.status();  // not consumed: every later call sees it
  std::memcpy(features, s.features.data(), s.features.size() * sizeof(float));
  std::memcpy(labels, s.labels.data(), s.labels.size() * sizeof(int32_t));
  if (ids != nullptr && !s.ids.empty()) {
    std::memcpy(ids, s.ids.data(), s.ids.size() * sizeof(int64_t));
  }
  const int64_t epoch = *s.epoch;
  absl::MutexLock lock(&mu_);
  ++consumed_;
  return epoch;
}

absl::Duration Prefetcher::waited() {
  absl::MutexLock lock(&mu_);
  return waited_;
}

bool Prefetcher::WaitUntilFull(absl::Duration timeout) {
  const int64_t depth = static_cast<int64_t>(slots_.size());
  absl::MutexLock lock(&mu_);
  auto full = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return produced_ - consumed_ >= depth; };
  return mu_.AwaitWithTimeout(absl::Condition(&full), timeout);
}

}  // namespace pstrain::data
