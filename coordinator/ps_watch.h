// The chief's watch over the job's PS: heartbeats every PS (Health) on a
// thread of its own. A PS that stops answering is logged and counted
// (checkpoints wait while any is away); one that answers again without
// variables (restarted at the same address) gets every PS restored to the
// newest complete checkpoint under a new generation (PsKeeper::RestoreAll),
// which tells the training replicas to carry on from there; one away
// longer than `ps_wait` fails the job, naming it. A permanent failure of
// the job (JobTracker::Fail) is handed to `on_permanent_failure` (which
// stops the PS) and ends the watch. Thread-safe.
#ifndef PSTRAIN_COORDINATOR_PS_WATCH_H_
#define PSTRAIN_COORDINATOR_PS_WATCH_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/ps_admin.h"
#include "base/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/ps_keeper.h"

namespace pstrain::coordinator {

struct PsWatchOptions {
  // Heartbeat period; each Health call's deadline is twice this.
  absl::Duration heartbeat = absl::Milliseconds(500);
  // How long a PS may be away before the job fails.
  absl::Duration ps_wait = absl::Minutes(2);
  std::function<void(const absl::Status&)> on_permanent_failure;
  // The heartbeat's period and the absences are on this clock.
  const Clock* clock = Clock::Real();
};

class PsWatch {
 public:
  // Everything given must outlive the watch. Start starts watching.
  PsWatch(client::PsAdmin* admin, PsKeeper* keeper, JobTracker* tracker, PsWatchOptions options);
  // Stops the watch.
  ~PsWatch();
  PsWatch(const PsWatch&) = delete;
  PsWatch& operator=(const PsWatch&) = delete;

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the watch and waits for its thread; a restore in progress ends
  // first. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // PS not answering now.
  int ps_down() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One round of heartbeats: false when the watch is over (the job failed).
  bool Round() ABSL_LOCKS_EXCLUDED(mu_);

  client::PsAdmin* const admin_;
  PsKeeper* const keeper_;
  JobTracker* const tracker_;
  const PsWatchOptions options_;

  // Owned by the watch's thread.
  std::vector<bool> down_;
  std::vector<absl::Time> down_since_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int ps_down_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_PS_WATCH_H_
