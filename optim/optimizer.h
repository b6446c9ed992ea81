// Optimizers applied by the PS to a slice when a gradient arrives, with the
// formulas TensorFlow's training ops use (ApplyGradientDescent,
// ApplyMomentum, ApplyAdagrad, ApplyAdam, ApplyFtrl; Nadam as Keras's
// optimizer computes it). Per-element state (the "slots")
// lives beside the slice in ShardStore; an Optimizer holds only its
// hyper-parameters. Thread-compatible: callers hold the slice's lock.
#ifndef PSTRAIN_OPTIM_OPTIMIZER_H_
#define PSTRAIN_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cluster/optimizer_spec.h"

namespace pstrain::optim {

using ::pstrain::OptimizerSpec;

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The learning rate of the t-th update (t >= 1; its schedule's step is
  // t - 1: OptimizerSpec::schedule, ScheduledLearningRate).
  float LearningRate(int64_t t) const;
  bool scheduled() const { return scheduled_; }

  // No optimizer keeps more than this many slots per element.
  static constexpr int kMaxSlots = 2;

  // Slots per variable element (0 for SGD, 1 for momentum and Adagrad, 2 for
  // Adam, Nadam and FTRL; at most kMaxSlots), and their names for stats and checkpoints.
  virtual int num_slots() const = 0;
  virtual std::vector<std::string> slot_names() const = 0;
  // The value every slot element starts at.
  virtual float initial_slot_value(int slot) const { return 0.0f; }

  // Applies `grad` to `values`, updating `slots` (num_slots() spans, each of
  // values.size()). `t` is the 1-based count of updates applied to this slice
  // including this one (Adam's bias correction, Nadam's schedule). REQUIRES: sizes match.
  // Apply runs in the caller's floating-point mode; ApplyBytes (unless
  // overridden), ApplyStrided and ApplyBytesStrided flush denormals to zero
  // (base/flush_denormals.h), as callers of Apply should for slot
  // optimizers: decaying slots otherwise turn denormal and slow every step.
  virtual void Apply(absl::Span<float> values, absl::Span<const float> grad,
                     absl::Span<const absl::Span<float>> slots, int64_t t) const = 0;

  // As Apply, with the gradient as raw little-endian float bytes at any
  // alignment (straight from a received message): values.size() * 4 bytes
  // at `grad`. The default copies through a small aligned buffer.
  virtual void ApplyBytes(absl::Span<float> values, const char* grad,
                          absl::Span<const absl::Span<float>> slots, int64_t t) const;

  // The same on a block laid out as the PS keeps slices and table rows:
  // `n` values at `values`, slot k's at values + (k + 1) * stride.
  void ApplyStrided(float* values, const float* grad, int64_t n, int64_t stride, int64_t t) const;
  void ApplyBytesStrided(float* values, const char* grad, int64_t n, int64_t stride,
                         int64_t t) const;
  // Whether ApplyBytesExchanging works: true for optimizers without slots
  // (SGD), whose step can be taken back from the previous values alone.
  virtual bool can_exchange() const { return false; }
  // Applies the n gradient floats at `grad` (raw bytes, any alignment) to
  // `values` as ApplyBytes does, and writes each element's previous value
  // over its gradient bytes: copying those bytes back undoes the step
  // exactly (`t` as Apply's). The gradient is checked for NaN and Inf in the same pass, a
  // block of kExchangeBlock floats before it is applied; the pass stops at
  // the first block holding one. Returns how many leading floats were
  // applied: n, or the start of that block (whose bytes are as received).
  // REQUIRES: can_exchange().
  static constexpr int64_t kExchangeBlock = 64;
  virtual int64_t ApplyBytesExchanging(float* values, char* grad, int64_t n, int64_t t) const;

  // Gives the slots of such a block their initial values. REQUIRES: they
  // hold zeros (freshly allocated), which slots starting at 0 keep.
  void InitSlots(float* values, int64_t n, int64_t stride) const;

  // Step `t` on an embedding row (laid out as ApplyStrided's) that the
  // step's batch does not name, under dense table updates, as Keras's
  // optimizers take it in their sparse apply: Adam moves the row with a
  // zero gradient (the default: ApplyStrided with zeros); Nadam decays its
  // slots (m by beta1, v by beta2) and leaves its values; SGD, momentum
  // and Adagrad leave it as it is.
  virtual void ApplyToRowNotInBatch(float* values, int64_t n, int64_t stride, int64_t t) const;

  // Step `t` of a dense table update (OptimizerSpec::dense_table_updates)
  // on every row of a table laid out as the PS and LocalTable keep one (row
  // r at rows + r * dim * (1 + num_slots()): its dim values, then each
  // slot's dim): row r takes grad_of[r] (dim floats) when it is not null,
  // else ApplyToRowNotInBatch. grad_of.size() rows; denormals flushed.
  void StepRows(float* rows, int64_t dim, absl::Span<const float* const> grad_of, int64_t t) const;

 protected:
  explicit Optimizer(const OptimizerSpec& spec)
      : spec_(spec), scheduled_(spec.schedule != "constant") {}

 private:
  const OptimizerSpec spec_;
  const bool scheduled_;
};

// InvalidArgument naming the field for an unknown name, a learning rate that
// is not positive and finite, momentum outside [0, 1), betas outside [0, 1),
// epsilon or initial_accumulator not positive; CheckSchedule's errors.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerSpec& spec);

// What a non-trainable variable moved by increments (batch normalization's
// moving statistics; cluster/placement.h's VariableUpdate::kIncrement)
// takes in an optimizer's place: values += pushed, no slots, no learning
// rate or schedule.
std::unique_ptr<Optimizer> CreateIncrement();

}  // namespace pstrain::optim

#endif  // PSTRAIN_OPTIM_OPTIMIZER_H_
