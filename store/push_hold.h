// A hold on the pushes one PS applies, so that a checkpoint can cut every PS
// of a job at one moment.
//
// Each PS takes its own snapshot under its tensors' locks, but the PS of a
// job get the chief's save request at different instants; without a hold,
// the pushes that land between the first PS's cut and the last one's are in
// some shards and not in others, and a replica resuming from the checkpoint
// redoes (or skips) that many steps. The chief therefore holds every PS
// first (HoldPushes), reads the step at the cut, and then asks each PS to
// save; each one releases its hold as soon as its own cut is taken. A replica
// blocked on one held PS pushes nothing further anywhere, so the shards then
// differ by at most the one push per replica that was in flight when the
// hold began.
//
// A hold is a lease: it ends by itself when `lease` passes, so a chief that
// dies between the hold and the save stalls training for that long at most.
// Thread-safe.
#ifndef PSTRAIN_STORE_PUSH_HOLD_H_
#define PSTRAIN_STORE_PUSH_HOLD_H_

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace pstrain::ps {

class PushHold {
 public:
  // Leases run on `clock` (never null; must outlive the hold).
  explicit PushHold(const Clock* clock = Clock::Real()) : clock_(clock) {}

  // A push admitted past the hold; its destructor says it has been applied.
  class Pass {
   public:
    explicit Pass(PushHold* hold) : hold_(hold) {}
    Pass(Pass&& other) noexcept : hold_(other.hold_) { other.hold_ = nullptr; }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    Pass& operator=(Pass&&) = delete;
    ~Pass() {
      if (hold_ != nullptr) hold_->Leave();
    }

   private:
    PushHold* hold_;
  };

  // Called by each push before it touches a tensor: waits while a hold is
  // on (until it is released or its lease ends).
  Pass Enter() ABSL_LOCKS_EXCLUDED(mu_);

  // Enter without waiting, for a thread that must not wait (a gRPC
  // callback thread: with all of them waiting, the PS could not serve the
  // very save that releases the hold). Empty while a hold is on.
  std::optional<Pass> TryEnter() ABSL_LOCKS_EXCLUDED(mu_);

  // Holds new pushes for at most `lease` and returns once no push admitted
  // earlier is still being applied. A second Hold renews the lease.
  // InvalidArgument for a lease that is not positive; DeadlineExceeded (and
  // no hold) when the pushes being applied did not finish within the lease.
  absl::Status Hold(absl::Duration lease) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the hold; pushes waiting go on. No effect without one.
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  // A hold is on and its lease has not ended.
  bool held() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a hold whose lease has passed.
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time until_ ABSL_GUARDED_BY(mu_);
  int64_t applying_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_PUSH_HOLD_H_
