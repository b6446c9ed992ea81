// The chief's periodic checkpoints: on a thread of its own, every
// `every_secs` seconds and/or every `every_steps` global steps (0: not on
// that account), the job's PS are checkpointed at one moment
// (PsKeeper::CheckpointNow). None is tried while a PS is away (the PS
// watch's count): it would fail, and hold up the restore that follows its
// return. A checkpoint that fails is logged and tried again later; the job
// goes on. Thread-safe.
#ifndef PSTRAIN_COORDINATOR_CHECKPOINT_LOOP_H_
#define PSTRAIN_COORDINATOR_CHECKPOINT_LOOP_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/ps_admin.h"
#include "base/clock.h"
#include "coordinator/ps_keeper.h"

namespace pstrain::coordinator {

struct CheckpointLoopOptions {
  int every_secs = 60;
  int64_t every_steps = 0;
  // How often the loop looks at the step and the time.
  absl::Duration poll = absl::Milliseconds(200);
  // PS away now (PsWatch::ps_down); null: none ever.
  std::function<int()> ps_down;
  // The periods are on this clock.
  const Clock* clock = Clock::Real();
};

class CheckpointLoop {
 public:
  // `admin` and `keeper` must outlive the loop.
  CheckpointLoop(client::PsAdmin* admin, PsKeeper* keeper, CheckpointLoopOptions options);
  ~CheckpointLoop();
  CheckpointLoop(const CheckpointLoop&) = delete;
  CheckpointLoop& operator=(const CheckpointLoop&) = delete;

  // Starts checkpointing (nothing when neither period is set).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the loop once a checkpoint in progress is written. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the loop to end without waiting for it (the PS are about to be
  // stopped): no checkpoint starts after this, and one in progress that
  // then fails is not logged, since the PS going away is why. Stop() still
  // joins the thread.
  void RequestStop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  client::PsAdmin* const admin_;
  PsKeeper* const keeper_;
  const CheckpointLoopOptions options_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_CHECKPOINT_LOOP_H_
