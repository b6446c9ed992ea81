// The consistency rules of one stored tensor (cluster/consistency.h): which
// pushes a tensor takes, when a sync round is complete, and when a
// replica's pull may be answered.
//   async  every push is taken; pulls never wait.
//   sync   pushes for version v are summed (AddToRoundLocked) until
//          `aggregate` distinct replicas have pushed; the round then ends
//          with one update and version v + 1. A push for an older version
//          is dropped as stale; one for a newer version, or a second one
//          from the same replica, is refused. A replica's pull waits until
//          the tensor has moved past every version it pushed.
//   ssp:S  every push is taken and moves the pushing replica's clock; a
//          replica's pull waits while its clock is more than S ahead of the
//          slowest replica's.
#ifndef PSTRAIN_STORE_ROUND_GATE_H_
#define PSTRAIN_STORE_ROUND_GATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/stored_tensor.h"

namespace pstrain::ps {

// Sizes the round state of a new tensor for `num_replicas` replicas.
void InitRoundsLocked(StoredTensor& t, int num_replicas) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// Whether a push from `replica` of a gradient computed at `version` is taken
// (true) or dropped as stale (false): a sync step that has passed, or one at
// or past `stop_step` (0: none), which the stopped replicas would never
// finish. FailedPrecondition for a sync push ahead of the tensor or repeated
// by a replica. Always true for async and ssp.
absl::StatusOr<bool> AdmitPushLocked(const StoredTensor& t, int64_t version, int replica,
                                     int64_t stop_step) ABSL_SHARED_LOCKS_REQUIRED(t.mu);

// Counts a gradient taken (not dropped) from `replica` and its staleness.
void CountPushLocked(StoredTensor& t, int64_t version, int replica)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
// Records a dropped stale push from `replica` at `version`: counted as
// received and dropped, not in the staleness histogram (of applied ones).
void DropStaleLocked(StoredTensor& t, int64_t version, int replica)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// sync: adds a taken gradient to the round (`ids`: a table's rows, each
// dim floats of `grad`; dense: the whole tensor). Returns true when the
// round now has `aggregate` contributions and its sum is ready to apply.
bool AddToRoundLocked(StoredTensor& t, absl::Span<const int64_t> ids, const float* grad,
                      int replica, int64_t version, int aggregate)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
// sync: after the round's sum was applied, starts the next round.
void EndRoundLocked(StoredTensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// After an update (t.updates already counts it): publishes the version and,
// for ssp, moves the replica's clock. Returns whether a waiting pull may now
// be ready.
bool FinishUpdateLocked(StoredTensor& t, int replica) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// Clears partial sums, contributions and clocks (after a restore).
void ResetRoundsLocked(StoredTensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

// What a pull waits for.
struct PullWait {
  int replica = 0;        // < 0: an observer, which never waits
  int64_t min_step = 0;   // sync: at least this version
  int64_t stop_step = 0;  // sync: no waiting once the tensor is here (0: none)
};
// Whether a pull described by `w` may read t now; if not, says why in
// `*why`, naming the replicas it waits for.
bool ReadyLocked(const StoredTensor& t, const PullWait& w, int num_replicas, int aggregate,
                 std::string* why) ABSL_SHARED_LOCKS_REQUIRED(t.mu);

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_ROUND_GATE_H_
