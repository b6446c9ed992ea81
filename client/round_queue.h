// Exchanges run one after another, in the order queued, on a thread of the
// queue's own, so that the thread queueing them can compute meanwhile: the
// asynchronous core of a store whose calls block (client/remote_store.h).
// Each exchange returns a global step or an error; after the first error
// the exchanges not yet begun are skipped, and every wait from then on
// returns that error. Thread-safe.
#ifndef PSTRAIN_CLIENT_ROUND_QUEUE_H_
#define PSTRAIN_CLIENT_ROUND_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pstrain::client {

class RoundQueue {
 public:
  using Round = std::function<absl::StatusOr<int64_t>()>;

  RoundQueue();
  // Runs (or, after an error, skips) what is still queued, then joins.
  ~RoundQueue();
  RoundQueue(const RoundQueue&) = delete;
  RoundQueue& operator=(const RoundQueue&) = delete;

  // Queues `round`; returns its number (1, 2, ...).
  int64_t Enqueue(Round round) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until rounds 1..`number` have ended (0: returns at once). The
  // first error of any round so far, else the largest step they returned.
  absl::StatusOr<int64_t> WaitFor(int64_t number) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until every round queued has ended or been skipped, then clears
  // the error and returns it: rounds queued from now on run again.
  absl::Status Drain() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<Round> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  // Last: started once the fields it reads exist.
  std::thread thread_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_ROUND_QUEUE_H_
