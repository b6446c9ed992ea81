// How a pushed gradient changes a stored tensor: the optimizer (for a
// non-trainable tensor, the increment rule: added as it is) applied to a
// dense slice (streamed from where the gradient was received, in runs that
// stay in L1, on several cores for large slices), to a table's rows (lazy:
// only the rows pushed move, each with its own update count), or to a sync
// round's averaged sum; and the NaN/Inf checks that keep a bad gradient out.
// The consistency rules (which pushes are taken, when a round ends) are
// round_gate.h's.
#ifndef PSTRAIN_STORE_UPDATE_RULES_H_
#define PSTRAIN_STORE_UPDATE_RULES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/payload.h"
#include "optim/optimizer.h"
#include "store/stored_tensor.h"

namespace pstrain::ps {

// The error for a NaN or Inf in a push.
absl::Status NonFiniteGradient(absl::string_view key, float value, int64_t element);

// Copies n floats of gradient from payload byte `offset` into `dst`,
// checking each is finite, in blocks small enough to stay in L1. Returns the
// index of the first non-finite element, or -1.
int64_t CopyFinite(const Payload& payload, int64_t offset, int64_t n, float* dst);

// Checks n floats of gradient from payload byte `offset` in place (on
// several cores when large). Returns the index of the first non-finite
// element (and its value in *bad_value), or -1.
int64_t CheckFinite(const Payload& payload, int64_t offset, int64_t n, float* bad_value);

// Sums the rows of a table gradient whose id repeats into the first
// occurrence: `grad` holds ids.size() rows of `dim` floats; afterwards its
// first unique->size() rows are those of the distinct ids, in order.
void MergeRepeatedRows(absl::Span<const int64_t> ids, int64_t dim, float* grad,
                       std::vector<int64_t>* unique);

class UpdateRules {
 public:
  // `optimizer` must outlive this. `aggregate`: sync gradients per step.
  // `dense_tables`: a table's update steps every row it holds with the
  // table's update count (OptimizerSpec::dense_table_updates; the rows not
  // in the push as Optimizer::ApplyToRowNotInBatch says), not only the
  // pushed rows with their own counts.
  UpdateRules(const optim::Optimizer* optimizer, int aggregate, bool dense_tables = false)
      : opt_(optimizer),
        increment_(optim::CreateIncrement()),
        aggregate_(aggregate),
        dense_tables_(dense_tables) {}

  const optim::Optimizer& optimizer() const { return *opt_; }
  // What moves `t`: the job's optimizer, or, for a non-trainable tensor
  // (VariableUpdate::kIncrement), the pushed values added as they are.
  const optim::Optimizer& RuleOf(const StoredTensor& t) const {
    return t.update == VariableUpdate::kOptimizer ? *opt_ : *increment_;
  }

  // Applies a taken gradient held in memory (already checked) to a table
  // (any mode; `ids` distinct, one row of grad each) or to a dense sync
  // slice (added to the round; applied averaged when the round completes).
  // Returns whether a waiting pull may now be ready.
  bool ApplyLocked(StoredTensor& t, absl::Span<const int64_t> ids, int64_t version, int replica,
                   const float* grad) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

  // Applies a dense, async or ssp gradient (already checked) read from
  // payload byte `offset` run by run. The new values are copied to
  // `read_back` when not null, or over the gradient in `rewrite` (the same
  // payload, writable) when that is not null. Returns whether a waiting pull
  // may now be ready.
  bool ApplyStreamedLocked(StoredTensor& t, int64_t version, int replica, const Payload& payload,
                           int64_t offset, char* read_back, Payload* rewrite) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

  // Applies dense async gradients with an optimizer that can exchange (SGD):
  // targets[i]'s gradient is payload bytes [offsets[i], offsets[i+1]),
  // checked run by run for NaN/Inf just before Optimizer::ApplyBytesExchanging
  // leaves the previous values over it. All or none: on a bad value the
  // tensors done so far get their previous values back from the payload,
  // and InvalidArgument names it. Does not count the update
  // (FinishUpdateLocked). REQUIRES: every target locked, payload writable.
  absl::Status ExchangeLocked(const std::vector<StoredTensor*>& targets, Payload& payload,
                              const std::vector<int64_t>& offsets) const
      ABSL_NO_THREAD_SAFETY_ANALYSIS;

 private:
  // Applies the round's averaged sum and starts the next round.
  void ApplyRoundLocked(StoredTensor& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);
  // A dense table update at `step`: grads[i] (dim floats) for row ids[i],
  // every other held row as the optimizer takes a row outside the batch.
  void ApplyDenseTableLocked(StoredTensor& t, absl::Span<const int64_t> ids,
                             absl::Span<const float* const> grads, int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(t.mu);

  const optim::Optimizer* const opt_;
  const std::unique_ptr<optim::Optimizer> increment_;
  const int aggregate_;
  const bool dense_tables_;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_STORE_UPDATE_RULES_H_
