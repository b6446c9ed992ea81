#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/finite.h"
#include "base/flush_denormals.h"
#include "base/vector_clones.h"
#include "optim/count_table.h"

namespace pstrain::optim {
namespace {

// The update loops, compiled for AVX-512, AVX2 and baseline x86-64
// (base/vector_clones.h). __restrict: slots, values and gradients never
// overlap, which lets the loops vectorise.

PSTRAIN_VECTOR_CLONES
void SgdLoop(float* __restrict v, const float* __restrict g, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) v[i] -= lr * g[i];
}

PSTRAIN_VECTOR_CLONES
void SgdBytesLoop(float* __restrict v, const char* __restrict g, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, g + 4 * i, 4);  // unaligned loads, vectorised
    v[i] -= lr * x;
  }
}

// Always inlined: compiled inside each of SgdExchangeLoop's clones, with
// their instruction set, so that its arithmetic is SgdBytesLoop's (a call
// to an outlined copy, as -O0 makes, would take the baseline's
// instructions: no fused multiply-add).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void SgdExchange(float* __restrict v, char* __restrict g,
                                                     size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, g + 4 * i, 4);
    const float old = v[i];
    v[i] = old - lr * x;  // as SgdBytesLoop computes it
    std::memcpy(g + 4 * i, &old, 4);
  }
}

// Checks and applies a block at a time, so the gradient's and the values'
// memory streams are read side by side (a separate checking pass over a
// whole 16 KiB run first costs about 4% of a 4 MiB push-then-pull).
PSTRAIN_VECTOR_CLONES
size_t SgdExchangeLoop(float* __restrict v, char* __restrict g, size_t n, float lr) {
  constexpr size_t kBlock = Optimizer::kExchangeBlock;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (AnyNonFinite(g + 4 * i, kBlock)) return i;
    SgdExchange(v + i, g + 4 * i, kBlock, lr);
  }
  if (AnyNonFinite(g + 4 * i, n - i)) return i;
  SgdExchange(v + i, g + 4 * i, n - i, lr);
  return n;
}

PSTRAIN_VECTOR_CLONES
void MomentumLoop(float* __restrict v, float* __restrict a, const float* __restrict g, size_t n,
                  float lr, float momentum, bool nesterov) {
  if (nesterov) {
    for (size_t i = 0; i < n; ++i) {
      a[i] = momentum * a[i] + g[i];
      v[i] -= lr * (g[i] + momentum * a[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      a[i] = momentum * a[i] + g[i];
      v[i] -= lr * a[i];
    }
  }
}

PSTRAIN_VECTOR_CLONES
void AdagradLoop(float* __restrict v, float* __restrict a, const float* __restrict g, size_t n,
                 float lr, float eps) {
  for (size_t i = 0; i < n; ++i) {
    a[i] += g[i] * g[i];
    v[i] -= lr * g[i] / (std::sqrt(a[i]) + eps);
  }
}

// The gradient as raw bytes at any alignment: what the PS received, or a
// float array (train --local, rows); one loop for both, so the two agree
// bit for bit.
PSTRAIN_VECTOR_CLONES
void AdamLoop(float* __restrict v, float* __restrict m, float* __restrict s,
              const char* __restrict g, size_t n, float step, float b1, float b2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, g + 4 * i, 4);  // unaligned loads, vectorised
    m[i] = b1 * m[i] + (1 - b1) * x;
    s[i] = b2 * s[i] + (1 - b2) * x * x;
    v[i] -= step * m[i] / (std::sqrt(s[i]) + eps);
  }
}

PSTRAIN_VECTOR_CLONES
void NadamLoop(float* __restrict v, float* __restrict m, float* __restrict s,
               const float* __restrict g, size_t n, float lr, float b1, float b2, float c_m,
               float c_g, float inv_b2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    s[i] = b2 * s[i] + (1 - b2) * g[i] * g[i];
    v[i] -= lr * (c_m * m[i] + c_g * g[i]) / (std::sqrt(s[i] * inv_b2) + eps);
  }
}

// FTRL-Proximal as tf.raw_ops.ApplyFtrl with learning-rate power -1/2.
PSTRAIN_VECTOR_CLONES
void FtrlLoop(float* __restrict v, float* __restrict acc, float* __restrict lin,
              const float* __restrict g, size_t n, float lr, float l1, float l2) {
  const float inv_lr = 1 / lr;
  for (size_t i = 0; i < n; ++i) {
    const float a = acc[i] + g[i] * g[i];
    const float root = std::sqrt(a);
    lin[i] += g[i] - (root - std::sqrt(acc[i])) * inv_lr * v[i];
    const float quadratic = root * inv_lr + 2 * l2;
    const float l = lin[i];
    v[i] = std::fabs(l) > l1 ? (std::copysign(l1, l) - l) / quadratic : 0.0f;
    acc[i] = a;
  }
}

}  // namespace

void Optimizer::ApplyBytes(absl::Span<float> values, const char* grad,
                           absl::Span<const absl::Span<float>> slots, int64_t t) const {
  ScopedFlushDenormals flush;
  constexpr size_t kBlock = 1024;
  float buf[kBlock];
  absl::Span<float> sub[kMaxSlots];
  for (size_t begin = 0; begin < values.size(); begin += kBlock) {
    const size_t len = std::min(kBlock, values.size() - begin);
    std::memcpy(buf, grad + begin * 4, len * 4);
    for (size_t k = 0; k < slots.size(); ++k) sub[k] = slots[k].subspan(begin, len);
    Apply(values.subspan(begin, len), absl::MakeConstSpan(buf, len),
          absl::MakeConstSpan(sub, slots.size()), t);
  }
}

void Optimizer::ApplyStrided(float* values, const float* grad, int64_t n, int64_t stride,
                             int64_t t) const {
  ScopedFlushDenormals flush;
  absl::Span<float> slots[kMaxSlots];
  for (int k = 0; k < num_slots(); ++k) slots[k] = absl::MakeSpan(values + (k + 1) * stride, n);
  Apply(absl::MakeSpan(values, n), absl::MakeConstSpan(grad, n),
        absl::MakeConstSpan(slots, num_slots()), t);
}

void Optimizer::ApplyBytesStrided(float* values, const char* grad, int64_t n, int64_t stride,
                                  int64_t t) const {
  absl::Span<float> slots[kMaxSlots];
  for (int k = 0; k < num_slots(); ++k) slots[k] = absl::MakeSpan(values + (k + 1) * stride, n);
  ApplyBytes(absl::MakeSpan(values, n), grad, absl::MakeConstSpan(slots, num_slots()), t);
}

float Optimizer::LearningRate(int64_t t) const {
  return scheduled_ ? ScheduledLearningRate(spec_, t) : spec_.learning_rate;
}

int64_t Optimizer::ApplyBytesExchanging(float*, char*, int64_t, int64_t) const {
  std::fprintf(stderr, "ApplyBytesExchanging called on an optimizer with slots\n");
  std::abort();
}

void Optimizer::InitSlots(float* values, int64_t n, int64_t stride) const {
  for (int k = 0; k < num_slots(); ++k) {
    const float v = initial_slot_value(k);
    if (v != 0.0f) std::fill(values + (k + 1) * stride, values + (k + 1) * stride + n, v);
  }
}

void Optimizer::ApplyToRowNotInBatch(float* values, int64_t n, int64_t stride, int64_t t) const {
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  ApplyStrided(values, zeros.data(), n, stride, t);
}

void Optimizer::StepRows(float* rows, int64_t dim, absl::Span<const float* const> grad_of,
                         int64_t t) const {
  ScopedFlushDenormals flush;
  const int64_t stride = dim * (1 + num_slots());
  for (size_t r = 0; r < grad_of.size(); ++r) {
    float* row = rows + r * stride;
    if (grad_of[r] != nullptr) {
      ApplyStrided(row, grad_of[r], dim, dim, t);
    } else {
      ApplyToRowNotInBatch(row, dim, dim, t);
    }
  }
}

namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerSpec& s) : Optimizer(s) {}
  int num_slots() const override { return 0; }
  std::vector<std::string> slot_names() const override { return {}; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>>, int64_t t) const override {
    SgdLoop(values.data(), grad.data(), values.size(), LearningRate(t));
  }
  // Keras's sparse apply touches only the batch's rows.
  void ApplyToRowNotInBatch(float*, int64_t, int64_t, int64_t) const override {}
  void ApplyBytes(absl::Span<float> values, const char* grad, absl::Span<const absl::Span<float>>,
                  int64_t t) const override {
    SgdBytesLoop(values.data(), grad, values.size(), LearningRate(t));
  }
  bool can_exchange() const override { return true; }
  int64_t ApplyBytesExchanging(float* values, char* grad, int64_t n, int64_t t) const override {
    return static_cast<int64_t>(
        SgdExchangeLoop(values, grad, static_cast<size_t>(n), LearningRate(t)));
  }
};

// A non-trainable variable's rule (VariableUpdate::kIncrement): the
// pushed values are added as they are, SGD's loops with a rate of -1
// (exact: v - (-1 * g) is v + g).
class Increment final : public Optimizer {
 public:
  Increment() : Optimizer(OptimizerSpec()) {}
  int num_slots() const override { return 0; }
  std::vector<std::string> slot_names() const override { return {}; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>>, int64_t) const override {
    SgdLoop(values.data(), grad.data(), values.size(), -1.0f);
  }
  void ApplyToRowNotInBatch(float*, int64_t, int64_t, int64_t) const override {}
  void ApplyBytes(absl::Span<float> values, const char* grad, absl::Span<const absl::Span<float>>,
                  int64_t) const override {
    SgdBytesLoop(values.data(), grad, values.size(), -1.0f);
  }
  bool can_exchange() const override { return true; }
  int64_t ApplyBytesExchanging(float* values, char* grad, int64_t n, int64_t) const override {
    return static_cast<int64_t>(SgdExchangeLoop(values, grad, static_cast<size_t>(n), -1.0f));
  }
};

class Momentum final : public Optimizer {
 public:
  explicit Momentum(const OptimizerSpec& s)
      : Optimizer(s), momentum_(s.momentum), nesterov_(s.nesterov) {}
  int num_slots() const override { return 1; }
  std::vector<std::string> slot_names() const override { return {"momentum"}; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    MomentumLoop(values.data(), slots[0].data(), grad.data(), values.size(), LearningRate(t),
                 momentum_, nesterov_);
  }
  // Keras's sparse apply touches only the batch's rows.
  void ApplyToRowNotInBatch(float*, int64_t, int64_t, int64_t) const override {}

 private:
  const float momentum_;
  const bool nesterov_;
};

class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerSpec& s)
      : Optimizer(s), init_(s.initial_accumulator), eps_(s.epsilon) {}
  int num_slots() const override { return 1; }
  std::vector<std::string> slot_names() const override { return {"accumulator"}; }
  float initial_slot_value(int) const override { return init_; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    AdagradLoop(values.data(), slots[0].data(), grad.data(), values.size(), LearningRate(t), eps_);
  }
  // Keras's sparse apply touches only the batch's rows.
  void ApplyToRowNotInBatch(float*, int64_t, int64_t, int64_t) const override {}

 private:
  const float init_, eps_;
};

class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerSpec& s)
      : Optimizer(s), b1_(s.beta1), b2_(s.beta2), eps_(s.epsilon) {}
  int num_slots() const override { return 2; }
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    AdamLoop(values.data(), slots[0].data(), slots[1].data(),
             reinterpret_cast<const char*>(grad.data()), values.size(), CachedStepSize(t), b1_, b2_,
             eps_);
  }
  void ApplyBytes(absl::Span<float> values, const char* grad,
                  absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    ScopedFlushDenormals flush;
    AdamLoop(values.data(), slots[0].data(), slots[1].data(), grad, values.size(),
             CachedStepSize(t), b1_, b2_, eps_);
  }

 private:
  // Bias correction folded into the step size, as tf.raw_ops.ApplyAdam.
  float StepSize(int64_t t) const {
    return static_cast<float>(LearningRate(t) * std::sqrt(1.0 - std::pow(double{b2_}, t)) /
                              (1.0 - std::pow(double{b1_}, t)));
  }

  const float b1_, b2_, eps_;
  // StepSize(t) from the table, or computed beyond it.
  float CachedStepSize(int64_t t) const {
    const float* cached = steps_.Get(t, [this](int64_t c, float* out) { *out = StepSize(c); });
    return cached != nullptr ? *cached : StepSize(t);
  }

  CountTable<1> steps_;  // StepSize by count
};

// Nadam as Keras computes it (Dozat's schedule): the momentum of step t is
// u_t = beta1 * (1 - 0.5 * 0.96^(0.004 t)); the step takes
//   m_hat = u_{t+1} m / (1 - prod_{i<=t+1} u_i) + (1 - u_t) g / (1 - prod_{i<=t} u_i)
//   v_hat = v / (1 - beta2^t)
//   var -= lr * m_hat / (sqrt(v_hat) + epsilon)
// The product of the schedule up to t comes in closed form, so a slot-free
// count t is enough (as Adam's bias correction).
class Nadam final : public Optimizer {
 public:
  explicit Nadam(const OptimizerSpec& s)
      : Optimizer(s), b1_(s.beta1), b2_(s.beta2), eps_(s.epsilon) {}
  int num_slots() const override { return 2; }
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    float computed[3];
    const float* c = factors_.Get(t, [this](int64_t n, float* out) { Factors(n, out); });
    if (c == nullptr) {
      Factors(t, computed);
      c = computed;
    }
    NadamLoop(values.data(), slots[0].data(), slots[1].data(), grad.data(), values.size(),
              LearningRate(t), b1_, b2_, c[0], c[1], c[2], eps_);
  }
  // Keras's sparse apply decays every row's m and v and moves only the
  // batch's rows.
  void ApplyToRowNotInBatch(float* values, int64_t n, int64_t stride, int64_t) const override {
    float* m = values + stride;
    float* v = values + 2 * stride;
    for (int64_t i = 0; i < n; ++i) {
      m[i] *= b1_;
      v[i] *= b2_;
    }
  }

 private:
  // The step's factors of m, of g and of v (c_m, c_g, 1 / (1 - beta2^t)).
  void Factors(int64_t t, float* out) const {
    const double u_t = Momentum(t), u_next = Momentum(t + 1);
    const double product = MomentumProduct(t), product_next = product * u_next;
    out[0] = static_cast<float>(u_next / (1 - product_next));
    out[1] = static_cast<float>((1 - u_t) / (1 - product));
    out[2] = static_cast<float>(1 / (1 - std::pow(double{b2_}, t)));
  }

  static constexpr double kDecay = 0.96, kRate = 0.004;
  double Momentum(int64_t t) const {
    return b1_ * (1 - 0.5 * std::pow(kDecay, kRate * static_cast<double>(t)));
  }
  // prod_{i=1..t} u_i = beta1^t * prod (1 - r^i / 2) with r = 0.96^0.004;
  // log(1 - x) = -sum_k x^k / k turns the product's log into geometric
  // sums: -sum_k 2^-k / k * r^k (1 - r^(k t)) / (1 - r^k), whose terms fall
  // by half each (48 terms: below 1e-15).
  double MomentumProduct(int64_t t) const {
    const double r = std::pow(kDecay, kRate);
    double log_sum = 0, half_k = 1, r_k = 1;
    for (int k = 1; k <= 48; ++k) {
      half_k *= 0.5;
      r_k *= r;
      log_sum -= half_k / k * r_k * (1 - std::pow(r_k, static_cast<double>(t))) / (1 - r_k);
    }
    return std::pow(double{b1_}, static_cast<double>(t)) * std::exp(log_sum);
  }

  const float b1_, b2_, eps_;
  CountTable<3> factors_;  // Factors by count
};

// FTRL-Proximal (McMahan et al.), the usual optimizer of wide sparse
// models: per element an accumulator of squared gradients (starting at
// initial_accumulator) and a linear term; the value follows in closed form,
// exactly 0 while |linear| <= l1.
class Ftrl final : public Optimizer {
 public:
  explicit Ftrl(const OptimizerSpec& s)
      : Optimizer(s), init_(s.initial_accumulator), l1_(s.l1), l2_(s.l2) {}
  int num_slots() const override { return 2; }
  std::vector<std::string> slot_names() const override { return {"accumulator", "linear"}; }
  float initial_slot_value(int slot) const override { return slot == 0 ? init_ : 0.0f; }
  void Apply(absl::Span<float> values, absl::Span<const float> grad,
             absl::Span<const absl::Span<float>> slots, int64_t t) const override {
    FtrlLoop(values.data(), slots[0].data(), slots[1].data(), grad.data(), values.size(),
             LearningRate(t), l1_, l2_);
  }

 private:
  const float init_, l1_, l2_;
};

absl::Status Bad(absl::string_view field, float value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer ", field, " ", value, " must be ", want));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerSpec& spec) {
  if (!(spec.learning_rate > 0) || !std::isfinite(spec.learning_rate)) {
    return Bad("learning_rate", spec.learning_rate, "a positive finite number");
  }
  if (absl::Status s = CheckSchedule(spec); !s.ok()) return s;
  if (spec.name == "sgd") return std::make_unique<Sgd>(spec);
  if (spec.name == "momentum") {
    if (!(spec.momentum >= 0 && spec.momentum < 1)) {
      return Bad("momentum", spec.momentum, "in [0, 1)");
    }
    return std::make_unique<Momentum>(spec);
  }
  if (!(spec.epsilon > 0) || !std::isfinite(spec.epsilon)) {
    return Bad("epsilon", spec.epsilon, "a positive finite number");
  }
  if (spec.name == "adagrad" || spec.name == "ftrl") {
    if (!(spec.initial_accumulator > 0) || !std::isfinite(spec.initial_accumulator)) {
      return Bad("initial_accumulator", spec.initial_accumulator, "a positive finite number");
    }
    if (spec.name == "ftrl") {
      if (!(spec.l1 >= 0) || !std::isfinite(spec.l1)) return Bad("l1", spec.l1, "0 or more");
      if (!(spec.l2 >= 0) || !std::isfinite(spec.l2)) return Bad("l2", spec.l2, "0 or more");
      return std::make_unique<Ftrl>(spec);
    }
    return std::make_unique<Adagrad>(spec);
  }
  if (spec.name == "adam" || spec.name == "nadam") {
    if (!(spec.beta1 >= 0 && spec.beta1 < 1)) return Bad("beta1", spec.beta1, "in [0, 1)");
    if (!(spec.beta2 >= 0 && spec.beta2 < 1)) return Bad("beta2", spec.beta2, "in [0, 1)");
    if (spec.name == "nadam") return std::make_unique<Nadam>(spec);
    return std::make_unique<Adam>(spec);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown optimizer \"", spec.name, "\" (known: sgd, momentum, adagrad, adam, nadam, ftrl)"));
}

std::unique_ptr<Optimizer> CreateIncrement() { return std::make_unique<Increment>(); }

}  // namespace pstrain::optim
