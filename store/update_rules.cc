#include "store/update_rules.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/finite.h"
#include "base/parallel_for.h"
#include "store/round_gate.h"

namespace pstrain::ps {
namespace {

// Tensors of more floats than this (1 MiB) are worked on by several cores.
constexpr int64_t kParallelGrain = 1 << 18;

// Update passes read the gradient where it was received in runs of at most
// this many floats (16 KiB), which stay in L1 while being worked on.
constexpr int64_t kRun = 4096;

}  // namespace

absl::Status NonFiniteGradient(absl::string_view key, float value, int64_t element) {
  return absl::InvalidArgumentError(absl::StrCat("gradient for ", key, " has a non-finite value (",
                                                 value, ") at element ", element));
}

int64_t CopyFinite(const Payload& payload, int64_t offset, int64_t n, float* dst) {
  constexpr int64_t kBlock = 4096;  // floats: 16 KiB
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t len = std::min(kBlock, n - begin);
    payload.Copy(offset + begin * 4, len * 4, dst + begin);
    const int64_t at = FindNonFinite(dst + begin, len);
    if (at >= 0) return begin + at;
  }
  return -1;
}

int64_t CheckFinite(const Payload& payload, int64_t offset, int64_t n, float* bad_value) {
  // In shares across cores for large tensors; the first bad element of the
  // earliest share is reported. Within a share, a run lying in one piece is
  // read in place.
  absl::Mutex mu;
  int64_t bad = -1;
  ParallelFor(n, kParallelGrain, [&](int64_t begin, int64_t end) {
    int64_t share_bad = -1;
    float value = 0;
    payload.ForEachFloatRun(offset + begin * 4, end - begin, end - begin,
                            [&](int64_t first, const char* p, int64_t count) {
                              if (share_bad >= 0) return;
                              const int64_t at = FindNonFinite(p, count);
                              if (at < 0) return;
                              std::memcpy(&value, p + 4 * at, 4);
                              share_bad = begin + first + at;
                            });
    if (share_bad < 0) return;
    absl::MutexLock lock(&mu);
    if (bad < 0 || share_bad < bad) {
      bad = share_bad;
      *bad_value = value;
    }
  });
  return bad;
}

void MergeRepeatedRows(absl::Span<const int64_t> ids, int64_t dim, float* grad,
                       std::vector<int64_t>* unique) {
  absl::flat_hash_map<int64_t, int64_t> first;
  first.reserve(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    auto [it, inserted] = first.try_emplace(ids[r], unique->size());
    float* dst = grad + it->second * dim;
    if (inserted) {
      unique->push_back(ids[r]);
      if (dst != grad + r * dim) std::memmove(dst, grad + r * dim, dim * 4);
    } else {
      for (int64_t j = 0; j < dim; ++j) dst[j] += grad[r * dim + j];
    }
  }
}

bool UpdateRules::ApplyLocked(StoredTensor& t, absl::Span<const int64_t> ids, int64_t version,
                              int replica, const float* grad) const {
  BeforeWriteLocked(t);
  CountPushLocked(t, version, replica);
  if (t.consistency.mode == Consistency::Mode::kSync) {
    if (!AddToRoundLocked(t, ids, grad, replica, version, aggregate_)) return false;
    ApplyRoundLocked(t);
    ++t.updates;
    FinishUpdateLocked(t, replica);
    EndRoundLocked(t);
    return true;
  }
  // A table, async or ssp.
  if (dense_tables_) {
    std::vector<const float*> grads(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) grads[i] = grad + i * t.dim;
    ApplyDenseTableLocked(t, ids, grads, t.updates + 1);
    ++t.updates;
    return FinishUpdateLocked(t, replica);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t r = 0;
    float* row = RowLocked(t, ids[i], *opt_, &r);
    opt_->ApplyStrided(row, grad + i * t.dim, t.dim, t.dim, ++t.row_updates[r]);
  }
  ++t.updates;
  return FinishUpdateLocked(t, replica);
}

void UpdateRules::ApplyDenseTableLocked(StoredTensor& t, absl::Span<const int64_t> ids,
                                        absl::Span<const float* const> grads, int64_t step) const {
  std::vector<const float*> grad_of;
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t r = 0;
    RowLocked(t, ids[i], *opt_, &r);
    if (grad_of.size() <= static_cast<size_t>(r)) grad_of.resize(r + 1, nullptr);
    grad_of[r] = grads[i];
  }
  grad_of.resize(t.row_updates.size(), nullptr);
  opt_->StepRows(t.data.data(), t.dim, grad_of, step);
  std::fill(t.row_updates.begin(), t.row_updates.end(), step);
}

void UpdateRules::ApplyRoundLocked(StoredTensor& t) const {
  const float scale = 1.0f / static_cast<float>(aggregate_);
  if (t.embedding) {
    for (auto& [id, acc] : t.sparse_accum) {
      for (float& v : acc) v *= scale;
    }
    if (dense_tables_) {
      std::vector<int64_t> ids;
      std::vector<const float*> grads;
      for (const auto& [id, acc] : t.sparse_accum) {
        ids.push_back(id);
        grads.push_back(acc.data());
      }
      ApplyDenseTableLocked(t, ids, grads, t.updates + 1);
      return;
    }
    for (auto& [id, acc] : t.sparse_accum) {
      int64_t r = 0;
      float* row = RowLocked(t, id, *opt_, &r);
      opt_->ApplyStrided(row, acc.data(), t.dim, t.dim, ++t.row_updates[r]);
    }
    return;
  }
  const int64_t n = t.def.elements();
  for (int64_t j = 0; j < n; ++j) t.accum[j] *= scale;
  RuleOf(t).ApplyStrided(t.data.data(), t.accum.data(), n, n, t.updates + 1);
}

bool UpdateRules::ApplyStreamedLocked(StoredTensor& t, int64_t version, int replica,
                                      const Payload& payload, int64_t offset, char* read_back,
                                      Payload* rewrite) const {
  BeforeWriteLocked(t);
  CountPushLocked(t, version, replica);
  const int64_t n = t.def.elements();
  const int64_t step = ++t.updates;
  float* data = t.data.data();
  const optim::Optimizer& rule = RuleOf(t);
  // The gradient is read run by run (kRun), so the values written back are
  // still in L1 when copied out: to `read_back`, or over the gradient itself
  // when `rewrite` is set.
  auto apply_run = [&](int64_t first, int64_t at, const char* grad, int64_t count, char* out) {
    float* values = data + first + at;
    rule.ApplyBytesStrided(values, grad, count, n, step);
    if (out != nullptr) std::memcpy(out, values, count * 4);
  };
  // Shares of a large tensor run on several cores, on this thread's behalf
  // (it holds the tensor's lock throughout).
  ParallelFor(n, kParallelGrain, [&](int64_t first, int64_t last) {
    if (rewrite != nullptr) {
      rewrite->RewriteFloatRuns(
          offset + first * 4, last - first, kRun,
          [&](int64_t at, char* grad, int64_t count) { apply_run(first, at, grad, count, grad); });
      return;
    }
    payload.ForEachFloatRun(
        offset + first * 4, last - first, kRun, [&](int64_t at, const char* grad, int64_t count) {
          apply_run(first, at, grad, count,
                    read_back == nullptr ? nullptr : read_back + (first + at) * 4);
        });
  });
  return FinishUpdateLocked(t, replica);
}

absl::Status UpdateRules::ExchangeLocked(const std::vector<StoredTensor*>& targets,
                                         Payload& payload,
                                         const std::vector<int64_t>& offsets) const {
  for (size_t i = 0; i < targets.size(); ++i) {
    StoredTensor& t = *targets[i];
    BeforeWriteLocked(t);
    const int64_t offset = offsets[i];
    float* data = t.data.data();
    const optim::Optimizer& rule = RuleOf(t);
    const int64_t step = t.updates + 1;  // the update this push makes
    absl::Mutex mu;
    int64_t bad = -1;
    float value = 0;
    std::vector<std::pair<int64_t, int64_t>> done;  // per share: first, floats applied
    ParallelFor(
        (offsets[i + 1] - offsets[i]) / 4, kParallelGrain, [&](int64_t first, int64_t last) {
          int64_t applied = 0;
          int64_t share_bad = -1;
          float share_value = 0;
          payload.RewriteFloatRuns(
              offset + first * 4, last - first, kRun, [&](int64_t at, char* grad, int64_t count) {
                if (share_bad >= 0) return;
                const int64_t ok = rule.ApplyBytesExchanging(data + first + at, grad, count, step);
                applied = at + ok;
                if (ok == count) return;
                const int64_t k = ok + FirstNonFinite(grad + 4 * ok, count - ok);
                share_bad = first + at + k;
                std::memcpy(&share_value, grad + 4 * k, 4);
              });
          absl::MutexLock lock(&mu);
          done.emplace_back(first, applied);
          if (share_bad >= 0 && (bad < 0 || share_bad < bad)) {
            bad = share_bad;
            value = share_value;
          }
        });
    if (bad < 0) continue;
    // Undo: the previous values now lie where the gradient was.
    for (const auto& [first, applied] : done) {
      payload.Copy(offset + first * 4, applied * 4, data + first);
    }
    for (size_t j = 0; j < i; ++j) {
      payload.Copy(offsets[j], offsets[j + 1] - offsets[j], targets[j]->data.data());
    }
    return NonFiniteGradient(t.key, value, bad);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::ps
