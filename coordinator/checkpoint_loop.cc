#include "coordinator/checkpoint_loop.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "base/logging.h"

namespace pstrain::coordinator {

CheckpointLoop::CheckpointLoop(client::PsAdmin* admin, PsKeeper* keeper,
                               CheckpointLoopOptions options)
    : admin_(admin), keeper_(keeper), options_(std::move(options)) {}

CheckpointLoop::~CheckpointLoop() { Stop(); }

void CheckpointLoop::Start() {
  if (options_.every_secs <= 0 && options_.every_steps <= 0) return;
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void CheckpointLoop::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

void CheckpointLoop::RequestStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void CheckpointLoop::Loop() {
  const Clock& clock = *options_.clock;
  absl::Time last_time = clock.Now();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Wakes every poll to look at the step, or at once to stop.
      clock.AwaitWithTimeout(&mu_, absl::Condition(&stopping_), options_.poll);
      if (stopping_) return;
    }
    if (options_.ps_down && options_.ps_down() > 0) continue;
    const int64_t last_step = std::max<int64_t>(keeper_->last_checkpoint(), 0);
    bool due = options_.every_secs > 0 &&
               clock.Now() - last_time >= absl::Seconds(options_.every_secs);
    if (!due && options_.every_steps > 0) {
      auto step = admin_->GlobalStep();
      if (!step.ok()) continue;
      due = *step >= last_step + options_.every_steps;
    }
    if (!due) continue;
    last_time = clock.Now();
    // A failed checkpoint is reported and tried again later; the job goes
    // on. Not once the PS are being stopped: that is why it failed.
    if (absl::Status s = keeper_->CheckpointNow(); !s.ok()) {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      Log("checkpoint failed: ", s.message());
    }
  }
}

}  // namespace pstrain::coordinator
