#include "store/push_hold.h"

#include "absl/strings/str_cat.h"

namespace pstrain::ps {

void PushHold::ExpireLocked() {
  if (held_ && clock_->Now() >= until_) held_ = false;
}

PushHold::Pass PushHold::Enter() {
  absl::MutexLock lock(&mu_);
  while (held_) {
    const absl::Time until = until_;
    clock_->AwaitWithDeadline(&mu_, absl::Condition(+[](bool* held) { return !*held; }, &held_),
                              until);
    ExpireLocked();
  }
  ++applying_;
  return Pass(this);
}

std::optional<PushHold::Pass> PushHold::TryEnter() {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  if (held_) return std::nullopt;
  ++applying_;
  return Pass(this);
}

void PushHold::Leave() {
  absl::MutexLock lock(&mu_);
  --applying_;
}

absl::Status PushHold::Hold(absl::Duration lease) {
  if (lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a push hold needs a positive lease, got ", absl::FormatDuration(lease)));
  }
  absl::MutexLock lock(&mu_);
  held_ = true;
  until_ = clock_->Now() + lease;
  const bool drained = clock_->AwaitWithDeadline(
      &mu_, absl::Condition(+[](int64_t* applying) { return *applying == 0; }, &applying_), until_);
  if (!drained) {
    held_ = false;
    return absl::DeadlineExceededError(
        absl::StrCat(applying_, " push(es) were still being applied when the hold's lease of ",
                     absl::FormatDuration(lease), " ended; nothing is held"));
  }
  return absl::OkStatus();
}

void PushHold::Release() {
  absl::MutexLock lock(&mu_);
  held_ = false;
}

bool PushHold::held() const {
  absl::MutexLock lock(&mu_);
  return held_ && clock_->Now() < until_;
}

}  // namespace pstrain::ps
