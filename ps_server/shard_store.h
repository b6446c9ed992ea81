// Holds this PS's slices of the variables, each contiguous in memory with its
// optimizer slots beside it, and applies pushed gradients to them
// asynchronously (on arrival, under the slice's lock).
//
// Lifecycle: created empty; Initialize() fills it once (the chief's
// CreateVariables); afterwards the set of slices never changes, so lookups
// need no lock and calls on different slices never contend.
//
// Thread-safe.
#ifndef PSTRAIN_PS_SERVER_SHARD_STORE_H_
#define PSTRAIN_PS_SERVER_SHARD_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/placement.h"
#include "ps_server/optimizer.h"

namespace pstrain::ps {

struct SliceStatsSnapshot {
  std::string key;
  int64_t bytes = 0;
  int64_t pushes = 0;
  int64_t pulls = 0;
};

class ShardStore {
 public:
  explicit ShardStore(int ps_index) : ps_index_(ps_index) {}
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  int ps_index() const { return ps_index_; }

  // Creates the slices with their initial values (raw little-endian float32
  // bytes, one entry per slice) and the optimizer.
  // Returns true when created now, false when the store was already
  // initialised (the existing values are kept; the request is ignored).
  // InvalidArgument, with nothing stored, when: a slice is meant for another
  // PS, a key repeats, row bounds do not fit the shape, an initial value has
  // the wrong byte length or holds NaN/Inf, or the optimizer is unknown.
  absl::StatusOr<bool> Initialize(const std::vector<SliceDef>& slices,
                                  const std::vector<absl::string_view>& values,
                                  const OptimizerSpec& optimizer)
      ABSL_LOCKS_EXCLUDED(init_mu_);

  bool initialized() const { return initialized_.load(std::memory_order_acquire); }

  // Copies slice `key` into `out` (resized to the slice's bytes).
  // FailedPrecondition before Initialize; NotFound for a key this PS does not
  // hold. `out` is untouched on error.
  absl::Status Pull(absl::string_view key, std::string* out) const;

  // One gradient of a push request: slice key and raw float32 bytes.
  struct Update {
    absl::string_view key;
    absl::string_view gradient;
  };

  // Applies every update of one push request with the optimizer and counts
  // one global step. All updates are checked before any is applied, so a bad
  // one leaves every slice untouched. Returns the new global step.
  // FailedPrecondition before Initialize; NotFound for an unknown key;
  // InvalidArgument when a key repeats, a byte length differs from the
  // slice's, or an element is NaN or Inf.
  absl::StatusOr<int64_t> Push(absl::Span<const Update> updates);

  // Push requests applied so far.
  int64_t global_step() const { return step_.load(); }

  std::vector<SliceStatsSnapshot> Stats() const;

 private:
  struct Slice {
    SliceDef def;
    mutable absl::Mutex mu;
    // The values, then each optimizer slot, in one contiguous block:
    // values at [0, n), slot k at [(k+1) n, (k+2) n).
    std::vector<float> data ABSL_GUARDED_BY(mu);
    // Updates applied to this slice (Adam's t).
    int64_t updates ABSL_GUARDED_BY(mu) = 0;
    std::atomic<int64_t> pushes{0};
    mutable std::atomic<int64_t> pulls{0};
  };

  // nullptr when not initialised or unknown; `status` says which.
  Slice* Find(absl::string_view key, absl::Status* status) const;
  // Checks one update against its slice (found by the caller).
  static absl::Status ValidateUpdate(const Slice& slice, const Update& u);

  const int ps_index_;
  absl::Mutex init_mu_;
  std::atomic<bool> initialized_{false};
  // Written once under init_mu_ before initialized_ is set (release);
  // read-only afterwards, so readers that saw initialized_ need no lock.
  std::map<std::string, std::unique_ptr<Slice>, std::less<>> slices_;
  std::unique_ptr<Optimizer> optimizer_;
  std::atomic<int64_t> step_{0};
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_SHARD_STORE_H_
