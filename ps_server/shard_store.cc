#include "ps_server/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/finite.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"

namespace pstrain::ps {

namespace {

// Copies n floats of gradient out of the frame into `dst`, checking each is
// finite, in blocks small enough to stay in L1. Returns the index of the
// first non-finite element, or -1.
int64_t CopyFinite(const DecodedFrame& frame, int64_t offset, int64_t n, float* dst) {
  constexpr int64_t kBlock = 4096;  // floats: 16 KiB
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t len = std::min(kBlock, n - begin);
    frame.CopyPayload(offset + begin * 4, len * 4, dst + begin);
    const int64_t at = FirstNonFinite(dst + begin, len);
    if (at >= 0) return begin + at;
  }
  return -1;
}

// Checks n floats of gradient in the frame without keeping a copy: a block
// lying in one received slice is read in place, any other passes through a
// small buffer that stays in L1. Returns the index of the first non-finite
// element (and its value in *bad_value), or -1.
int64_t CheckFinite(const DecodedFrame& frame, int64_t offset, int64_t n, float* bad_value) {
  int64_t bad = -1;
  frame.ForEachFloatRun(offset, n, n, [&](int64_t first, const char* p, int64_t count) {
    if (bad >= 0) return;
    const int64_t at = FirstNonFinite(p, count);
    if (at >= 0) {
      std::memcpy(bad_value, p + 4 * at, 4);
      bad = first + at;
    }
  });
  return bad;
}

// Tensors of more floats than this (1 MiB) are worked on by several cores.
constexpr int64_t kParallelGrain = 1 << 18;

// Update passes read the gradient where gRPC received it in runs of at
// most this many floats (16 KiB), which stay in L1 while being worked on.
constexpr int64_t kRun = 4096;

// The error for a NaN or Inf in a push.
absl::Status NonFiniteGradient(absl::string_view key, float value, int64_t element) {
  return absl::InvalidArgumentError(absl::StrCat(
      "gradient for ", key, " has a non-finite value (", value, ") at element ", element));
}

// Per-thread scratch for gradients, reused across calls so MiB-sized pushes
// allocate nothing in steady state.
std::vector<float>& Scratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

}  // namespace

struct ShardStore::ValuesPin {
  // Slices of answers not yet released by gRPC.
  std::atomic<int> slices{0};
  // The values' buffer once the tensor has moved on (BeforeWriteLocked);
  // freed with the last slice.
  std::vector<float> orphan;
};

namespace {

// The destroy callback of a pinned slice: user data is a heap-held
// shared_ptr to the pin.
template <typename Pin>
void ReleasePin(void* user_data) {
  auto* holder = static_cast<std::shared_ptr<Pin>*>(user_data);
  // Release: gRPC's reads of the values happen before a writer that sees
  // the count drop (BeforeWriteLocked's acquire).
  (*holder)->slices.fetch_sub(1, std::memory_order_release);
  delete holder;
}

}  // namespace

ShardStore::ShardStore(int ps_index, int num_ps, int64_t max_table_rows)
    : ps_index_(ps_index), num_ps_(num_ps), max_table_rows_(max_table_rows) {}

ShardStore::~ShardStore() {
  // Answers still in flight keep the buffers they are sent from.
  for (const auto& t : tensors_) {
    absl::MutexLock lock(&t->mu);
    BeforeWriteLocked(*t);
  }
}

void ShardStore::AppendPinnedLocked(Tensor& t, std::vector<grpc::Slice>* slices) {
  if (t.pin == nullptr) t.pin = std::make_shared<ValuesPin>();
  t.pin->slices.fetch_add(1, std::memory_order_relaxed);
  slices->emplace_back(t.data.data(), static_cast<size_t>(t.bytes), &ReleasePin<ValuesPin>,
                       new std::shared_ptr<ValuesPin>(t.pin));
}

void ShardStore::BeforeWriteLocked(Tensor& t) {
  if (t.pin == nullptr || t.pin->slices.load(std::memory_order_acquire) == 0) return;
  // Moving the vector keeps its buffer where the slices point.
  t.pin->orphan = std::move(t.data);
  t.data = t.pin->orphan;
  t.pin.reset();
}

absl::StatusOr<bool> ShardStore::Initialize(const JobConfig& job,
                                            const std::vector<DenseInit>& dense,
                                            const std::vector<EmbeddingInit>& embeddings,
                                            bool await_restore) {
  absl::MutexLock lock(&init_mu_);
  if (initialized_.load()) return false;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt, optim::CreateOptimizer(job.optimizer));
  if (job.num_replicas < 1 || job.num_replicas > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_replicas is ", job.num_replicas, "; it must be from 1 to 4096"));
  }
  if (job.replicas_to_aggregate < 0 || job.replicas_to_aggregate > job.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replicas_to_aggregate is ", job.replicas_to_aggregate,
        "; it must be from 1 to num_replicas (", job.num_replicas, "), or 0 for all"));
  }
  const int slots = opt->num_slots();
  std::vector<std::unique_ptr<Tensor>> built;
  std::map<std::string, Tensor*, std::less<>> keys;
  auto mode_of = [&](const std::string& text, const std::string& key) -> absl::StatusOr<Consistency> {
    if (text.empty()) return job.consistency;
    auto c = ParseConsistency(text);
    if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", c.status().message()));
    return c;
  };
  auto add = [&](std::unique_ptr<Tensor> t) -> absl::Status {
    t->index = static_cast<int>(built.size());
    if (!keys.emplace(t->key, t.get()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t->key, " appears twice in CreateVariables"));
    }
    absl::MutexLock tl(&t->mu);
    if (t->consistency.mode == Consistency::Mode::kSync) {
      t->contributed.assign(job.num_replicas, 0);
      t->last_pushed.assign(job.num_replicas, -1);
      if (!t->embedding) t->accum.assign(t->def.elements(), 0.0f);
    }
    if (t->consistency.mode == Consistency::Mode::kSsp) {
      t->clocks.assign(job.num_replicas, 0);
    }
    built.push_back(std::move(t));
    return absl::OkStatus();
  };
  for (const DenseInit& d : dense) {
    const SliceDef& def = d.def;
    auto t = std::make_unique<Tensor>();
    t->key = def.key();
    t->variable = def.variable;
    t->def = def;
    if (def.ps != ps_index_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice ", t->key, " is placed on ps:", def.ps, ", not on this ps:", ps_index_));
    }
    if (def.row_begin < 0 || def.row_end <= def.row_begin || def.row_elements < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice ", t->key, " has rows [", def.row_begin, ", ", def.row_end, ") of ",
          def.row_elements, " elements"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(t->consistency, mode_of(d.consistency, t->key));
    t->bytes = def.bytes();
    const int64_t n = def.elements();
    {
      absl::MutexLock tl(&t->mu);
      if (d.has_value) {
        if (static_cast<int64_t>(d.value.size()) != def.bytes()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "initial value for ", t->key, " has ", d.value.size(), " bytes, expected ",
              def.bytes()));
        }
        t->data.resize(n * (1 + slots));
        std::memcpy(t->data.data(), d.value.data(), d.value.size());
        for (int64_t i = 0; i < n; ++i) {
          if (!std::isfinite(t->data[i])) {
            return absl::InvalidArgumentError(absl::StrCat(
                "initial value for ", t->key, " has a non-finite value (", t->data[i],
                ") at element ", i));
          }
        }
      } else {
        if (d.initializer.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "slice ", t->key, " has neither an initial value nor an initializer"));
        }
        auto init = optim::Initializer::Parse(d.initializer);
        if (!init.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(t->key, ": ", init.status().message()));
        }
        t->data.resize(n * (1 + slots));
        init->Fill(job.seed, def.variable, def.element_offset(), n, t->data.data());
      }
      opt->InitSlots(t->data.data(), n, n);
    }
    PSTRAIN_RETURN_IF_ERROR(add(std::move(t)));
  }
  for (const EmbeddingInit& e : embeddings) {
    auto t = std::make_unique<Tensor>();
    t->key = e.variable;
    t->variable = e.variable;
    t->embedding = true;
    if (e.variable.empty() || e.vocabulary < 1 || e.dim < 1 || e.dim > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding table \"", e.variable, "\" has vocabulary ", e.vocabulary, " and dim ",
          e.dim, "; both must be positive (dim at most 1048576)"));
    }
    t->vocabulary = e.vocabulary;
    t->dim = e.dim;
    PSTRAIN_ASSIGN_OR_RETURN(t->consistency, mode_of(e.consistency, t->key));
    auto init = optim::Initializer::Parse(e.initializer.empty() ? "uniform:0.05" : e.initializer);
    if (!init.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(t->key, ": ", init.status().message()));
    }
    t->init = *init;
    PSTRAIN_RETURN_IF_ERROR(add(std::move(t)));
  }
  job_ = job;
  aggregate_ = job.replicas_to_aggregate > 0 ? job.replicas_to_aggregate : job.num_replicas;
  tensors_ = std::move(built);
  by_key_ = std::move(keys);
  optimizer_ = std::move(opt);
  generation_.store(job.generation, std::memory_order_release);
  initialized_.store(true, std::memory_order_release);
  ready_.store(!await_restore, std::memory_order_release);
  return true;
}

absl::StatusOr<ShardStore::Tensor*> ShardStore::Find(absl::string_view key) const {
  if (!initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: the chief has not initialised them"));
  }
  auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    return absl::NotFoundError(absl::StrCat("ps:", ps_index_, " holds no tensor \"", key, "\""));
  }
  return it->second;
}

absl::StatusOr<int64_t> ShardStore::TensorBytes(const Tensor& t, const TensorRef& ref) const {
  if (!t.embedding) {
    if (!ref.ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.key, " is dense but the request names ", ref.ids.size(), " ids"));
    }
    return t.bytes;
  }
  for (int64_t id : ref.ids) {
    if (id < 0 || id >= t.vocabulary) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " is out of range [0, ", t.vocabulary, ") for table ", t.key));
    }
    const int owner = EmbeddingOwner(id, num_ps_);
    if (owner != ps_index_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " of table ", t.key, " belongs to ps:", owner, ", not ps:", ps_index_));
    }
  }
  return static_cast<int64_t>(ref.ids.size()) * t.dim * 4;
}

std::vector<ShardStore::TensorRef> ShardStore::RefsOf(
    const google::protobuf::RepeatedPtrField<v1::TensorRef>& refs) {
  std::vector<TensorRef> out(refs.size());
  for (int i = 0; i < refs.size(); ++i) {
    out[i].key = refs[i].key();
    out[i].ids = absl::MakeConstSpan(refs[i].ids().data(), refs[i].ids_size());
    out[i].version = refs[i].version();
    out[i].bytes = refs[i].bytes();
  }
  return out;
}

float* ShardStore::RowLocked(Tensor& t, int64_t id) {
  const int64_t stride = t.dim * (1 + optimizer_->num_slots());
  auto [it, inserted] = t.row_of.try_emplace(id, static_cast<int64_t>(t.row_updates.size()));
  if (inserted) {
    t.data.resize(t.data.size() + stride);
    float* row = t.data.data() + it->second * stride;
    t.init.Fill(job_.seed, t.variable, id * t.dim, t.dim, row);
    optimizer_->InitSlots(row, t.dim, t.dim);
    t.row_updates.push_back(0);
    t.rows.store(static_cast<int64_t>(t.row_updates.size()), std::memory_order_relaxed);
  }
  return t.data.data() + it->second * stride;
}

void ShardStore::ReadRowLocked(const Tensor& t, int64_t id, char* out) const {
  auto it = t.row_of.find(id);
  if (it != t.row_of.end()) {
    const int64_t stride = t.dim * (1 + optimizer_->num_slots());
    std::memcpy(out, t.data.data() + it->second * stride, t.dim * 4);
    return;
  }
  float row[256];
  for (int64_t done = 0; done < t.dim; done += 256) {
    const int64_t n = std::min<int64_t>(256, t.dim - done);
    t.init.Fill(job_.seed, t.variable, id * t.dim + done, n, row);
    std::memcpy(out + done * 4, row, n * 4);
  }
}

absl::Status ShardStore::CheckRowLimitLocked(const Tensor& t,
                                             absl::Span<const int64_t> ids) const {
  // Every pending and named row counted as new bounds the growth: within
  // the limit, nothing needs counting exactly.
  if (static_cast<int64_t>(t.row_of.size() + t.sparse_accum.size() + ids.size()) <=
      max_table_rows_) {
    return absl::OkStatus();
  }
  int64_t rows = static_cast<int64_t>(t.row_of.size());
  for (const auto& [id, acc] : t.sparse_accum) rows += !t.row_of.contains(id);
  for (int64_t id : ids) {
    rows += !t.row_of.contains(id) && !t.sparse_accum.contains(id);
  }
  if (rows <= max_table_rows_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "table ", t.key, " would grow to ", rows, " rows on ps:", ps_index_, "; the limit is ",
      max_table_rows_, " (--max_table_rows)"));
}

void ShardStore::CountPushLocked(Tensor& t, int64_t version) {
  t.pushes.fetch_add(1, std::memory_order_relaxed);
  t.staleness[StalenessBucket(t.updates - version)].fetch_add(1, std::memory_order_relaxed);
}

bool ShardStore::FinishUpdateLocked(Tensor& t, int replica) {
  t.version.store(t.updates, std::memory_order_release);
  if (t.consistency.mode != Consistency::Mode::kSsp) return false;
  ++t.clocks[replica];
  t.min_clock.store(*std::min_element(t.clocks.begin(), t.clocks.end()),
                    std::memory_order_release);
  return true;
}

bool ShardStore::ApplyLocked(Tensor& t, const TensorRef& ref, int replica, float* grad) {
  BeforeWriteLocked(t);
  CountPushLocked(t, ref.version);
  const size_t nids = ref.ids.size();
  switch (t.consistency.mode) {
    case Consistency::Mode::kAsync:
    case Consistency::Mode::kSsp: {  // tables only
      for (size_t i = 0; i < nids; ++i) {
        float* row = RowLocked(t, ref.ids[i]);
        const int64_t r = t.row_of[ref.ids[i]];
        optimizer_->ApplyStrided(row, grad + i * t.dim, t.dim, t.dim, ++t.row_updates[r]);
      }
      ++t.updates;
      return FinishUpdateLocked(t, replica);
    }
    case Consistency::Mode::kSync: {
      if (t.embedding) {
        for (size_t i = 0; i < nids; ++i) {
          std::vector<float>& acc = t.sparse_accum[ref.ids[i]];
          if (acc.empty()) acc.assign(t.dim, 0.0f);
          for (int64_t j = 0; j < t.dim; ++j) acc[j] += grad[i * t.dim + j];
        }
      } else {
        float* acc = t.accum.data();
        const int64_t n = t.def.elements();
        for (int64_t j = 0; j < n; ++j) acc[j] += grad[j];
      }
      t.contributed[replica] = 1;
      t.last_pushed[replica] = ref.version;
      if (++t.contributors < aggregate_) return false;
      const float scale = 1.0f / static_cast<float>(aggregate_);
      if (t.embedding) {
        for (auto& [id, acc] : t.sparse_accum) {
          for (float& v : acc) v *= scale;
          float* row = RowLocked(t, id);
          const int64_t r = t.row_of[id];
          optimizer_->ApplyStrided(row, acc.data(), t.dim, t.dim, ++t.row_updates[r]);
        }
        t.sparse_accum.clear();
      } else {
        const int64_t n = t.def.elements();
        for (int64_t j = 0; j < n; ++j) t.accum[j] *= scale;
        optimizer_->ApplyStrided(t.data.data(), t.accum.data(), n, n, t.updates + 1);
        std::fill(t.accum.begin(), t.accum.end(), 0.0f);
      }
      ++t.updates;
      FinishUpdateLocked(t, replica);
      std::fill(t.contributed.begin(), t.contributed.end(), 0);
      t.contributors = 0;
      return true;
    }
  }
  return false;
}

bool ShardStore::ApplyStreamedLocked(Tensor& t, const TensorRef& ref, int replica,
                                     const DecodedFrame& frame, int64_t offset,
                                     char* read_back, DecodedFrame* rewrite) {
  BeforeWriteLocked(t);
  CountPushLocked(t, ref.version);
  const int64_t n = t.def.elements();
  const int64_t step = ++t.updates;
  float* data = t.data.data();
  // The gradient is read run by run (kRun), so the values written back are
  // still in L1 when copied out: to `read_back`, or over the gradient itself
  // when `rewrite` is set.
  auto apply_run = [&](int64_t first, int64_t at, const char* grad, int64_t count,
                       char* out) {
    float* values = data + first + at;
    optimizer_->ApplyBytesStrided(values, grad, count, n, step);
    if (out != nullptr) std::memcpy(out, values, count * 4);
  };
  // Shares of a large tensor run on several cores, on this thread's behalf
  // (it holds the tensor's lock throughout).
  ParallelFor(n, kParallelGrain, [&](int64_t first, int64_t last) {
    if (rewrite != nullptr) {
      rewrite->RewriteFloatRuns(offset + first * 4, last - first, kRun,
                                [&](int64_t at, char* grad, int64_t count) {
                                  apply_run(first, at, grad, count, grad);
                                });
      return;
    }
    frame.ForEachFloatRun(offset + first * 4, last - first, kRun,
                          [&](int64_t at, const char* grad, int64_t count) {
                            apply_run(first, at, grad, count,
                                      read_back == nullptr
                                          ? nullptr
                                          : read_back + (first + at) * 4);
                          });
  });
  return FinishUpdateLocked(t, replica);
}

absl::Status ShardStore::ExchangeLocked(const std::vector<Tensor*>& targets,
                                        const std::vector<TensorRef>& refs,
                                        DecodedFrame& frame, int64_t payload_offset,
                                        const std::vector<int64_t>& offsets) {
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor& t = *targets[i];
    BeforeWriteLocked(t);
    const int64_t offset = payload_offset + offsets[i];
    float* data = t.data.data();
    absl::Mutex mu;
    int64_t bad = -1;
    float value = 0;
    std::vector<std::pair<int64_t, int64_t>> done;  // per share: first, floats applied
    ParallelFor((offsets[i + 1] - offsets[i]) / 4, kParallelGrain,
                [&](int64_t first, int64_t last) {
                  int64_t applied = 0;
                  int64_t share_bad = -1;
                  float share_value = 0;
                  frame.RewriteFloatRuns(
                      offset + first * 4, last - first, kRun,
                      [&](int64_t at, char* grad, int64_t count) {
                        if (share_bad >= 0) return;
                        const int64_t ok =
                            optimizer_->ApplyBytesExchanging(data + first + at, grad, count);
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
      frame.CopyPayload(offset + first * 4, applied * 4, data + first);
    }
    for (size_t j = 0; j < i; ++j) {
      frame.CopyPayload(payload_offset + offsets[j], offsets[j + 1] - offsets[j],
                        targets[j]->data.data());
    }
    return NonFiniteGradient(refs[i].key, value, bad);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> ShardStore::Push(const PushBatch& batch,
                                                   const DecodedFrame& frame,
                                                   int64_t payload_offset) {
  if (!initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: the chief has not initialised them"));
  }
  if (!batch.consistency.empty() && batch.consistency != job_.consistency.ToString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "push is for a ", batch.consistency, " job but this job runs ",
        job_.consistency.ToString()));
  }
  if (batch.replica < 0 || batch.replica >= job_.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica ", batch.replica, " is out of range: the job has ", job_.num_replicas,
        " replicas"));
  }
  const size_t n = batch.tensors.size();
  std::vector<Tensor*> targets(n);
  std::vector<int64_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const TensorRef& ref = batch.tensors[i];
    PSTRAIN_ASSIGN_OR_RETURN(targets[i], Find(ref.key));
    for (size_t j = 0; j < i; ++j) {
      if (targets[j] == targets[i]) {
        return absl::InvalidArgumentError(absl::StrCat("push names ", ref.key, " twice"));
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes, TensorBytes(*targets[i], ref));
    if (ref.bytes >= 0 && ref.bytes != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient for ", ref.key, " has ", ref.bytes, " bytes, expected ", bytes));
    }
    offsets[i + 1] = offsets[i] + bytes;
  }
  if (payload_offset + offsets[n] != frame.payload_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push payload has ", frame.payload_size() - payload_offset,
        " bytes but its tensors need ", offsets[n]));
  }
  // Gradients into scratch, checked for NaN/Inf; table rows with repeated ids
  // are summed into the first occurrence.
  std::vector<float>& scratch = Scratch();
  if (scratch.size() < static_cast<size_t>(offsets[n] / 4)) scratch.resize(offsets[n] / 4);
  std::vector<std::vector<int64_t>> unique_ids(n);
  // Dense tensors applied on arrival stream their gradient from the frame
  // in L1-sized blocks (checked in one pass, applied in a second) instead of
  // going through scratch.
  std::vector<char> streamed(n);
  for (size_t i = 0; i < n; ++i) {
    streamed[i] = !targets[i]->embedding &&
                  targets[i]->consistency.mode != Consistency::Mode::kSync;
  }
  if (batch.read_back != nullptr || batch.read_back_in_frame != nullptr) {
    if (batch.read_back_in_frame != nullptr &&
        (batch.read_back != nullptr || batch.read_back_in_frame != &frame ||
         !frame.payload_in_slices() || batch.read_back_slices == nullptr)) {
      return absl::InternalError(
          "read_back_in_frame must be the pushed frame, its payload in its received slices, "
          "with read_back_slices set and read_back unset");
    }
    for (size_t i = 0; i < n; ++i) {
      if (!streamed[i] || targets[i]->consistency.mode != Consistency::Mode::kAsync) {
        return absl::InternalError("read-back push of a tensor that is not dense and async");
      }
    }
  }
  // Exchanging checks the gradient block by block as it applies it.
  const bool exchange = batch.read_back_in_frame != nullptr && optimizer_->can_exchange();
  for (size_t i = 0; i < n; ++i) {
    const TensorRef& ref = batch.tensors[i];
    const int64_t floats = (offsets[i + 1] - offsets[i]) / 4;
    if (streamed[i] && exchange) continue;
    if (streamed[i]) {
      // In shares across cores for large tensors; the first bad element of
      // the earliest share is reported.
      absl::Mutex bad_mu;
      int64_t bad = -1;
      float value = 0;
      ParallelFor(floats, kParallelGrain, [&](int64_t begin, int64_t end) {
        float v = 0;
        const int64_t at = CheckFinite(frame, payload_offset + offsets[i] + begin * 4,
                                       end - begin, &v);
        if (at < 0) return;
        absl::MutexLock lock(&bad_mu);
        if (bad < 0 || begin + at < bad) {
          bad = begin + at;
          value = v;
        }
      });
      if (bad >= 0) {
        return NonFiniteGradient(ref.key, value, bad);
      }
      continue;
    }
    float* g = scratch.data() + offsets[i] / 4;
    const int64_t bad = CopyFinite(frame, payload_offset + offsets[i], floats, g);
    if (bad >= 0) {
      return NonFiniteGradient(ref.key, g[bad], bad);
    }
    if (targets[i]->embedding) {
      const int64_t dim = targets[i]->dim;
      absl::flat_hash_map<int64_t, int64_t> first;
      for (size_t r = 0; r < ref.ids.size(); ++r) {
        auto [it, inserted] = first.try_emplace(ref.ids[r], unique_ids[i].size());
        float* dst = g + it->second * dim;
        if (inserted) {
          unique_ids[i].push_back(ref.ids[r]);
          if (dst != g + r * dim) std::memmove(dst, g + r * dim, dim * 4);
        } else {
          for (int64_t j = 0; j < dim; ++j) dst[j] += g[r * dim + j];
        }
      }
    }
  }
  // Lock every target in index order, check what depends on their state,
  // then apply.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return targets[a]->index < targets[b]->index; });
  for (size_t i : order) targets[i]->mu.Lock();
  absl::Status bad = CheckGeneration(batch.generation);
  std::vector<bool> applied(n, true);
  for (size_t i = 0; i < n && bad.ok(); ++i) {
    const Tensor& t = *targets[i];
    const TensorRef& ref = batch.tensors[i];
    t.mu.AssertHeld();
    if (t.embedding) {
      bad = CheckRowLimitLocked(t, unique_ids[i]);
      if (!bad.ok()) break;
    }
    if (t.consistency.mode != Consistency::Mode::kSync) continue;
    if (ref.version < t.updates || (batch.stop_step > 0 && t.updates >= batch.stop_step)) {
      applied[i] = false;  // a step that has passed: dropped below
    } else if (ref.version > t.updates) {
      bad = absl::FailedPreconditionError(absl::StrCat(
          "sync push for version ", ref.version, " of ", ref.key, " but it is at version ",
          t.updates, ": replica ", batch.replica, " did not wait for the step to complete"));
    } else if (t.contributed[batch.replica]) {
      bad = absl::FailedPreconditionError(absl::StrCat(
          "replica ", batch.replica, " already pushed version ", ref.version, " of ", ref.key));
    }
  }
  bool progress = false;
  if (bad.ok() && exchange) {
    // Every tensor is dense and async here (checked above).
    bad = ExchangeLocked(targets, batch.tensors, *batch.read_back_in_frame, payload_offset,
                         offsets);
    for (size_t i = 0; i < n && bad.ok(); ++i) {
      Tensor& t = *targets[i];
      t.mu.AssertHeld();
      CountPushLocked(t, batch.tensors[i].version);
      ++t.updates;
      progress |= FinishUpdateLocked(t, batch.replica);
      if (batch.read_back_versions != nullptr) {
        batch.read_back_versions->push_back({t.updates, t.bytes});
      }
      AppendPinnedLocked(t, batch.read_back_slices);
    }
  } else if (bad.ok()) {
    for (size_t i = 0; i < n; ++i) {
      Tensor& t = *targets[i];
      t.mu.AssertHeld();
      TensorRef ref = batch.tensors[i];
      ref.ids = unique_ids[i];
      if (!applied[i]) {
        t.last_pushed[batch.replica] = std::max(t.last_pushed[batch.replica], ref.version);
        CountPushLocked(t, ref.version);
        t.dropped_stale.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (streamed[i]) {
        char* out = batch.read_back == nullptr ? nullptr : batch.read_back + offsets[i];
        progress |= ApplyStreamedLocked(t, ref, batch.replica, frame,
                                        payload_offset + offsets[i], out,
                                        batch.read_back_in_frame);
        if (batch.read_back_versions != nullptr) {
          batch.read_back_versions->push_back({t.updates, t.bytes});
        }
      } else {
        progress |= ApplyLocked(t, ref, batch.replica, scratch.data() + offsets[i] / 4);
      }
    }
    if (batch.read_back_in_frame != nullptr) {
      *batch.read_back_slices = frame.PayloadSlices(payload_offset, offsets[n]);
    }
  }
  for (size_t i : order) targets[i]->mu.Unlock();
  if (!bad.ok()) return bad;
  if (progress) wait_list_.Notify();
  return applied;
}

bool ShardStore::CanReadBack(const PushBatch& push, const std::vector<TensorRef>& pull) const {
  if (!initialized() || push.tensors.size() != pull.size()) return false;
  for (size_t i = 0; i < pull.size(); ++i) {
    if (push.tensors[i].key != pull[i].key || !pull[i].ids.empty()) return false;
    auto t = Find(pull[i].key);
    if (!t.ok() || (*t)->embedding || (*t)->consistency.mode != Consistency::Mode::kAsync) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<int64_t> ShardStore::PullSize(const PullBatch& batch) const {
  int64_t total = 0;
  for (const TensorRef& ref : batch.tensors) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor * t, Find(ref.key));
    PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes, TensorBytes(*t, ref));
    total += bytes;
  }
  // Replica -1 is an observer (the chief, tools): it reads without waiting.
  if (initialized() && (batch.replica < -1 || batch.replica >= job_.num_replicas)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica ", batch.replica, " is out of range: the job has ", job_.num_replicas,
        " replicas"));
  }
  return total;
}

bool ShardStore::ReadyLocked(const Tensor& t, const PullBatch& b, std::string* why) const {
  if (b.replica < 0) return true;  // an observer never waits
  if (t.consistency.mode == Consistency::Mode::kSync) {
    const int64_t need = std::max(b.min_step, t.last_pushed[b.replica] + 1);
    if (t.updates >= need) return true;
    if (b.stop_step > 0 && t.updates >= b.stop_step) return true;  // the job is over
    std::vector<int> missing;
    for (int r = 0; r < job_.num_replicas; ++r) {
      if (!t.contributed[r]) missing.push_back(r);
    }
    *why = absl::StrCat(t.key, " is at step ", t.updates, " and replica ", b.replica,
                        " needs step ", need, "; ", t.contributors, " of ", aggregate_,
                        " gradients are in, none yet from replicas ",
                        absl::StrJoin(missing, ", "));
    return false;
  }
  if (t.consistency.mode == Consistency::Mode::kSsp) {
    const int64_t mine = t.clocks[b.replica];
    const int64_t need = mine - t.consistency.staleness;
    std::vector<int> slow;
    for (int r = 0; r < job_.num_replicas; ++r) {
      if (t.clocks[r] < need) slow.push_back(r);
    }
    if (!slow.empty()) {
      *why = absl::StrCat("replica ", b.replica, " is at clock ", mine, " of ", t.key,
                          " and may run at most ", t.consistency.staleness,
                          " ahead of the slowest; replicas ", absl::StrJoin(slow, ", "),
                          " are below clock ", need);
      return false;
    }
  }
  return true;
}

absl::StatusOr<bool> ShardStore::TryPull(const PullBatch& batch, char* out,
                                         std::vector<Pulled>* pulled,
                                         std::string* waiting_for) {
  // First: a pull parked before a restore must fail, not wait for a step
  // the restored values will not reach in its generation.
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
  std::vector<Tensor*> targets;
  targets.reserve(batch.tensors.size());
  for (const TensorRef& ref : batch.tensors) {
    PSTRAIN_ASSIGN_OR_RETURN(Tensor * t, Find(ref.key));
    PSTRAIN_RETURN_IF_ERROR(TensorBytes(*t, ref).status());
    targets.push_back(t);
  }
  for (Tensor* t : targets) {
    if (t->consistency.mode == Consistency::Mode::kAsync) continue;
    absl::MutexLock lock(&t->mu);
    if (!ReadyLocked(*t, batch, waiting_for)) return false;
  }
  pulled->clear();
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor& t = *targets[i];
    const TensorRef& ref = batch.tensors[i];
    {
      absl::MutexLock lock(&t.mu);
      PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
      const char* start = out;
      if (t.embedding) {
        for (int64_t id : ref.ids) {
          ReadRowLocked(t, id, out);
          out += t.dim * 4;
        }
      } else {
        const float* src = t.data.data();
        char* dst = out;
        ParallelFor(t.bytes / 4, kParallelGrain, [&](int64_t b, int64_t e) {
          std::memcpy(dst + b * 4, src + b, (e - b) * 4);
        });
        out += t.bytes;
      }
      pulled->push_back({t.updates, out - start});
    }
    t.pulls.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

int64_t ShardStore::global_step() const {
  if (!initialized()) return 0;
  // Dense tensors count; tables only when there is nothing else (an
  // untouched table must not hold the step back).
  bool any_dense = false;
  for (const auto& t : tensors_) any_dense |= !t->embedding;
  int64_t sync_min = -1, ssp_min = -1, async_max = 0;
  for (const auto& t : tensors_) {
    if (any_dense && t->embedding) continue;
    switch (t->consistency.mode) {
      case Consistency::Mode::kSync: {
        const int64_t v = t->version.load(std::memory_order_acquire);
        sync_min = sync_min < 0 ? v : std::min(sync_min, v);
        break;
      }
      case Consistency::Mode::kSsp: {
        const int64_t c = t->min_clock.load(std::memory_order_acquire);
        ssp_min = ssp_min < 0 ? c : std::min(ssp_min, c);
        break;
      }
      case Consistency::Mode::kAsync:
        async_max = std::max(async_max, t->version.load(std::memory_order_acquire));
        break;
    }
  }
  if (sync_min >= 0) return sync_min;
  if (ssp_min >= 0) return ssp_min;
  return async_max;
}

std::vector<TensorStats> ShardStore::Stats() const {
  std::vector<TensorStats> out;
  if (!initialized()) return out;
  for (const auto& t : tensors_) {
    TensorStats s;
    s.key = t->key;
    s.variable = t->variable;
    s.consistency = t->consistency.ToString();
    s.rows = t->rows.load(std::memory_order_relaxed);
    s.bytes = t->embedding ? s.rows * t->dim * 4 : t->bytes;
    s.pushes = t->pushes.load(std::memory_order_relaxed);
    s.pulls = t->pulls.load(std::memory_order_relaxed);
    s.version = t->version.load(std::memory_order_relaxed);
    s.dropped_stale = t->dropped_stale.load(std::memory_order_relaxed);
    for (int b = 0; b < kStalenessBuckets; ++b) {
      s.staleness[b] = t->staleness[b].load(std::memory_order_relaxed);
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<ckpt::ShardContents> ShardStore::Snapshot(int64_t step) const {
  if (!initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: nothing to checkpoint"));
  }
  ckpt::ShardContents shard;
  shard.header.set_step(step);
  shard.header.set_ps_index(ps_index_);
  shard.header.set_num_ps(num_ps_);
  shard.header.set_optimizer(job_.optimizer.name);
  shard.header.set_num_slots(optimizer_->num_slots());
  // One moment for every tensor: all locked (in index order) while copying.
  for (const auto& t : tensors_) t->mu.Lock();
  for (const auto& t : tensors_) {
    v1::TensorCheckpoint c;
    c.set_key(t->key);
    c.set_embedding(t->embedding);
    c.set_updates(t->updates);
    c.set_data(std::string(reinterpret_cast<const char*>(t->data.data()),
                           t->data.size() * sizeof(float)));
    if (t->embedding) {
      c.set_dim(t->dim);
      std::vector<int64_t> ids(t->row_updates.size());
      for (const auto& [id, row] : t->row_of) ids[row] = id;
      c.mutable_row_ids()->Add(ids.begin(), ids.end());
      c.mutable_row_updates()->Add(t->row_updates.begin(), t->row_updates.end());
    } else {
      c.set_elements(t->def.elements());
      c.set_variable(t->variable);
      c.set_row_begin(t->def.row_begin);
      c.set_row_end(t->def.row_end);
      c.set_row_elements(t->def.row_elements);
    }
    shard.tensors.push_back(std::move(c));
  }
  for (auto it = tensors_.rbegin(); it != tensors_.rend(); ++it) (*it)->mu.Unlock();
  return shard;
}

absl::Status ShardStore::Restore(const ckpt::ShardContents& shard, int64_t generation) {
  if (!initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: create them before restoring"));
  }
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint for ps:", shard.header.ps_index(), " of ",
                                            shard.header.num_ps(), " at step ",
                                            shard.header.step(), ": ", what));
  };
  if (shard.header.ps_index() != ps_index_ || shard.header.num_ps() != num_ps_) {
    return bad(absl::StrCat("this is ps:", ps_index_, " of ", num_ps_));
  }
  if (shard.header.num_slots() != optimizer_->num_slots()) {
    return bad(absl::StrCat("it holds ", shard.header.num_slots(), " optimizer slots (",
                            shard.header.optimizer(), ") but this job's ", job_.optimizer.name,
                            " has ", optimizer_->num_slots()));
  }
  const int per = 1 + optimizer_->num_slots();
  std::vector<const v1::TensorCheckpoint*> source(tensors_.size(), nullptr);
  for (const v1::TensorCheckpoint& c : shard.tensors) {
    auto t = Find(c.key());
    if (!t.ok()) return bad(absl::StrCat("it holds ", c.key(), ", which this job does not have"));
    Tensor& tensor = **t;
    if (source[tensor.index] != nullptr) return bad(absl::StrCat(c.key(), " appears twice"));
    if (c.embedding() != tensor.embedding) {
      return bad(absl::StrCat(c.key(), " is ", c.embedding() ? "a table" : "dense",
                              " there but not here"));
    }
    if (tensor.embedding) {
      if (absl::Status s = ckpt::CheckTableRecord(c, optimizer_->num_slots(), tensor.dim); !s.ok()) {
        return bad(s.message());
      }
      absl::flat_hash_set<int64_t> seen;
      for (int64_t id : c.row_ids()) {
        if (id < 0 || id >= tensor.vocabulary || EmbeddingOwner(id, num_ps_) != ps_index_) {
          return bad(absl::StrCat(c.key(), ": row id ", id, " does not belong on this PS"));
        }
        if (!seen.insert(id).second) {
          return bad(absl::StrCat(c.key(), ": row id ", id, " appears twice"));
        }
      }
    } else if (static_cast<int64_t>(c.data().size()) != tensor.def.elements() * per * 4) {
      return bad(absl::StrCat(c.key(), ": ", c.data().size(), " bytes, expected ",
                              tensor.def.elements() * per * 4, " (", tensor.def.elements(),
                              " values and their ", per - 1, " optimizer slots)"));
    }
    source[tensor.index] = &c;
  }
  for (const auto& t : tensors_) {
    if (source[t->index] == nullptr) return bad(absl::StrCat("it lacks ", t->key));
  }
  for (const auto& t : tensors_) t->mu.Lock();
  for (const auto& t : tensors_) {
    const v1::TensorCheckpoint& c = *source[t->index];
    BeforeWriteLocked(*t);
    t->data.resize(c.data().size() / sizeof(float));
    std::memcpy(t->data.data(), c.data().data(), c.data().size());
    t->updates = c.updates();
    if (t->embedding) {
      t->row_of.clear();
      for (int r = 0; r < c.row_ids_size(); ++r) t->row_of[c.row_ids(r)] = r;
      t->row_updates.assign(c.row_updates().begin(), c.row_updates().end());
      t->rows.store(c.row_ids_size(), std::memory_order_relaxed);
      t->sparse_accum.clear();
    } else if (!t->accum.empty()) {
      std::fill(t->accum.begin(), t->accum.end(), 0.0f);
    }
    std::fill(t->contributed.begin(), t->contributed.end(), 0);
    t->contributors = 0;
    std::fill(t->last_pushed.begin(), t->last_pushed.end(), int64_t{-1});
    std::fill(t->clocks.begin(), t->clocks.end(), int64_t{0});
    t->min_clock.store(0, std::memory_order_release);
    t->version.store(t->updates, std::memory_order_release);
  }
  restored_step_.store(shard.header.step(), std::memory_order_release);
  if (generation != 0) generation_.store(generation, std::memory_order_release);
  for (auto it = tensors_.rbegin(); it != tensors_.rend(); ++it) (*it)->mu.Unlock();
  ready_.store(true, std::memory_order_release);
  // Parked pulls of the old generation now fail instead of waiting on.
  wait_list_.Notify();
  return absl::OkStatus();
}

absl::Status ShardStore::CheckGeneration(int64_t generation) const {
  const int64_t mine = generation_.load(std::memory_order_acquire);
  if (generation == 0 || generation == mine) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(
      "ps:", ps_index_, " was restored from the checkpoint at step ", restored_step(),
      " (generation ", mine, "); this request is of generation ", generation,
      ": pull again and carry on from there"));
}

std::vector<ckpt::TargetTensor> ShardStore::Layout() const {
  std::vector<ckpt::TargetTensor> out;
  if (!initialized()) return out;
  for (const auto& t : tensors_) {
    ckpt::TargetTensor target;
    target.key = t->key;
    target.variable = t->variable;
    target.embedding = t->embedding;
    if (t->embedding) {
      target.dim = t->dim;
    } else {
      target.row_begin = t->def.row_begin;
      target.row_end = t->def.row_end;
      target.row_elements = t->def.row_elements;
    }
    out.push_back(std::move(target));
  }
  return out;
}

}  // namespace pstrain::ps
