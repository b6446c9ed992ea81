#include "store/round_gate.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::ps {

void InitRoundsLocked(StoredTensor& t, int num_replicas) {
  t.num_replicas = num_replicas;
  t.replica_pushes.assign(num_replicas, 0);
  if (t.consistency.mode == Consistency::Mode::kSync) {
    t.contributed.assign(num_replicas, 0);
    t.last_pushed.assign(num_replicas, -1);
    if (!t.embedding) t.accum.assign(t.def.elements(), 0.0f);
  }
  if (t.consistency.mode == Consistency::Mode::kSsp) t.clocks.assign(num_replicas, 0);
}

absl::StatusOr<bool> AdmitPushLocked(const StoredTensor& t, int64_t version, int replica,
                                     int64_t stop_step) {
  if (t.consistency.mode != Consistency::Mode::kSync) return true;
  if (version < t.updates || (stop_step > 0 && t.updates >= stop_step)) return false;
  if (version > t.updates) {
    return absl::FailedPreconditionError(
        absl::StrCat("sync push for version ", version, " of ", t.key, " but it is at version ",
                     t.updates, ": replica ", replica, " did not wait for the step to complete"));
  }
  if (t.contributed[replica]) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica ", replica, " already pushed version ", version, " of ", t.key));
  }
  return true;
}

void CountPushLocked(StoredTensor& t, int64_t version, int replica) {
  t.pushes.fetch_add(1, std::memory_order_relaxed);
  if (replica >= 0 && replica < static_cast<int>(t.replica_pushes.size())) {
    ++t.replica_pushes[replica];
  }
  t.staleness[StalenessBucket(t.updates - version)].fetch_add(1, std::memory_order_relaxed);
}

void DropStaleLocked(StoredTensor& t, int64_t version, int replica) {
  t.last_pushed[replica] = std::max(t.last_pushed[replica], version);
  // Received but not applied: counted apart, not in the histogram of the
  // staleness of applied gradients.
  t.pushes.fetch_add(1, std::memory_order_relaxed);
  t.dropped_stale.fetch_add(1, std::memory_order_relaxed);
}

bool AddToRoundLocked(StoredTensor& t, absl::Span<const int64_t> ids, const float* grad,
                      int replica, int64_t version, int aggregate) {
  if (t.embedding) {
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<float>& acc = t.sparse_accum[ids[i]];
      if (acc.empty()) acc.assign(t.dim, 0.0f);
      for (int64_t j = 0; j < t.dim; ++j) acc[j] += grad[i * t.dim + j];
    }
  } else {
    float* acc = t.accum.data();
    const int64_t n = t.def.elements();
    for (int64_t j = 0; j < n; ++j) acc[j] += grad[j];
  }
  t.contributed[replica] = 1;
  t.last_pushed[replica] = version;
  return ++t.contributors >= aggregate;
}

void EndRoundLocked(StoredTensor& t) {
  t.sparse_accum.clear();
  std::fill(t.accum.begin(), t.accum.end(), 0.0f);
  std::fill(t.contributed.begin(), t.contributed.end(), 0);
  t.contributors = 0;
}

bool FinishUpdateLocked(StoredTensor& t, int replica) {
  t.version.store(t.updates, std::memory_order_release);
  if (t.consistency.mode != Consistency::Mode::kSsp) return false;
  ++t.clocks[replica];
  t.min_clock.store(*std::min_element(t.clocks.begin(), t.clocks.end()), std::memory_order_release);
  return true;
}

void ResetRoundsLocked(StoredTensor& t) {
  EndRoundLocked(t);
  std::fill(t.last_pushed.begin(), t.last_pushed.end(), int64_t{-1});
  std::fill(t.clocks.begin(), t.clocks.end(), int64_t{0});
  t.min_clock.store(0, std::memory_order_release);
}

bool ReadyLocked(const StoredTensor& t, const PullWait& w, int num_replicas, int aggregate,
                 std::string* why) {
  if (w.replica < 0) return true;  // an observer never waits
  if (t.consistency.mode == Consistency::Mode::kSync) {
    const int64_t need = std::max(w.min_step, t.last_pushed[w.replica] + 1);
    if (t.updates >= need) return true;
    if (w.stop_step > 0 && t.updates >= w.stop_step) return true;  // the job is over
    std::vector<int> missing;
    for (int r = 0; r < num_replicas; ++r) {
      if (!t.contributed[r]) missing.push_back(r);
    }
    *why = absl::StrCat(t.key, " is at step ", t.updates, " and replica ", w.replica,
                        " needs step ", need, "; ", t.contributors, " of ", aggregate,
                        " gradients are in, none yet from replicas ", absl::StrJoin(missing, ", "));
    return false;
  }
  if (t.consistency.mode == Consistency::Mode::kSsp) {
    const int64_t mine = t.clocks[w.replica];
    const int64_t need = mine - t.consistency.staleness;
    std::vector<int> slow;
    for (int r = 0; r < num_replicas; ++r) {
      if (t.clocks[r] < need) slow.push_back(r);
    }
    if (!slow.empty()) {
      *why = absl::StrCat("replica ", w.replica, " is at clock ", mine, " of ", t.key,
                          " and may run at most ", t.consistency.staleness,
                          " ahead of the slowest; replicas ", absl::StrJoin(slow, ", "),
                          " are below clock ", need);
      return false;
    }
  }
  return true;
}

}  // namespace pstrain::ps
