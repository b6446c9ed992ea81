#include "store/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "cluster/initial_stream.h"
#include "optim/initializer.h"
#include "store/round_gate.h"
#include "store/store_checkpoint.h"

namespace pstrain::ps {

namespace {

// Tensors of more floats than this (1 MiB) are copied out by several cores.
constexpr int64_t kParallelGrain = 1 << 18;

// NonFiniteGradient naming `key` when the `n` floats of gradient at payload
// byte `offset` hold a NaN or Inf, checked in place; else OK.
absl::Status CheckGradientInPlace(const Payload& payload, int64_t offset, int64_t n,
                                  absl::string_view key) {
  float value = 0;
  const int64_t bad = CheckFinite(payload, offset, n, &value);
  return bad >= 0 ? NonFiniteGradient(key, value, bad) : absl::OkStatus();
}

// Per-thread scratch for gradients, reused across calls so MiB-sized pushes
// allocate nothing in steady state.
std::vector<float>& Scratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

using JobConfig = ShardStore::JobConfig;
using DenseInit = ShardStore::DenseInit;
using EmbeddingInit = ShardStore::EmbeddingInit;

// A tensor's consistency: its own (`text`, named by `key` in errors) or
// the job's.
absl::StatusOr<Consistency> ModeOf(const JobConfig& job, const std::string& text,
                                   const std::string& key) {
  if (text.empty()) return job.consistency;
  auto c = ParseConsistency(text);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", c.status().message()));
  return c;
}

// A slice whose values come from the job's initial stream, filled once
// every slice is built, in draw order (one stream read forward).
struct StreamFill {
  StoredTensor* tensor;
  optim::Initializer init;
  int64_t first;  // the slice's first element in its variable
  int64_t n;
  int64_t draw() const { return init.stream()->first_draw + first; }
};

// A dense slice placed on ps:`ps_index`, its values given or drawn from its
// initializer (a stream initializer's are added to *stream_fills instead),
// with the optimizer's slots after them when it is trainable.
absl::StatusOr<std::unique_ptr<StoredTensor>> BuildDense(const DenseInit& d, const JobConfig& job,
                                                         int ps_index, const optim::Optimizer& opt,
                                                         std::vector<StreamFill>* stream_fills) {
  const SliceDef& def = d.def;
  const bool trainable = d.update == VariableUpdate::kOptimizer;
  const int slots = trainable ? opt.num_slots() : 0;
  auto t = std::make_unique<StoredTensor>();
  t->key = def.key();
  t->variable = def.variable;
  t->def = def;
  t->update = d.update;
  t->slots = slots;
  if (def.ps != ps_index) {
    return absl::InvalidArgumentError(absl::StrCat("slice ", t->key, " is placed on ps:", def.ps,
                                                   ", not on this ps:", ps_index));
  }
  if (def.row_begin < 0 || def.row_end <= def.row_begin || def.row_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat("slice ", t->key, " has rows [", def.row_begin,
                                                   ", ", def.row_end, ") of ", def.row_elements,
                                                   " elements"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(t->consistency, ModeOf(job, d.consistency, t->key));
  t->bytes = def.bytes();
  const int64_t n = def.elements();
  absl::MutexLock tl(&t->mu);
  if (d.has_value) {
    if (static_cast<int64_t>(d.value.size()) != def.bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("initial value for ", t->key, " has ",
                                                     d.value.size(), " bytes, expected ",
                                                     def.bytes()));
    }
    t->data.resize(n * (1 + slots));
    std::memcpy(t->data.data(), d.value.data(), d.value.size());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(t->data[i])) {
        return absl::InvalidArgumentError(absl::StrCat("initial value for ", t->key,
                                                       " has a non-finite value (", t->data[i],
                                                       ") at element ", i));
      }
    }
  } else {
    if (d.initializer.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice ", t->key, " has neither an initial value nor an initializer"));
    }
    auto init = optim::Initializer::Parse(d.initializer);
    if (!init.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(t->key, ": ", init.status().message()));
    }
    t->data.resize(n * (1 + slots));
    if (init->stream().has_value()) {
      stream_fills->push_back({t.get(), *init, def.element_offset(), n});
    } else {
      init->Fill(job.seed, def.variable, def.element_offset(), n, t->data.data());
    }
  }
  if (trainable) opt.InitSlots(t->data.data(), n, n);
  return t;
}

// An embedding table (rows are made as they are first read).
absl::StatusOr<std::unique_ptr<StoredTensor>> BuildEmbedding(const EmbeddingInit& e,
                                                             const JobConfig& job) {
  auto t = std::make_unique<StoredTensor>();
  t->key = e.variable;
  t->variable = e.variable;
  t->embedding = true;
  if (e.variable.empty() || e.vocabulary < 1 || e.dim < 1 || e.dim > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table \"", e.variable, "\" has vocabulary ", e.vocabulary,
                     " and dim ", e.dim, "; both must be positive (dim at most 1048576)"));
  }
  t->vocabulary = e.vocabulary;
  t->dim = e.dim;
  PSTRAIN_ASSIGN_OR_RETURN(t->consistency, ModeOf(job, e.consistency, t->key));
  auto init = optim::Initializer::Parse(e.initializer.empty() ? "uniform:0.05" : e.initializer);
  if (!init.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(t->key, ": ", init.status().message()));
  }
  t->init = *init;
  return t;
}

absl::Status CheckReplicas(const JobConfig& job) {
  if (job.num_replicas < 1 || job.num_replicas > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_replicas is ", job.num_replicas, "; it must be from 1 to 4096"));
  }
  if (job.replicas_to_aggregate < 0 || job.replicas_to_aggregate > job.num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas_to_aggregate is ", job.replicas_to_aggregate,
                     "; it must be from 1 to num_replicas (", job.num_replicas, "), or 0 for all"));
  }
  return absl::OkStatus();
}

}  // namespace

ShardStore::ShardStore(int ps_index, int num_ps, int64_t max_table_rows, const Clock* clock)
    : ps_index_(ps_index),
      num_ps_(num_ps),
      max_table_rows_(max_table_rows),
      clock_(clock),
      wait_list_(clock),
      push_hold_(clock) {}

ShardStore::~ShardStore() {
  // Answers still in flight keep the buffers they are sent from.
  for (const auto& t : tensors_) {
    absl::MutexLock lock(&t->mu);
    BeforeWriteLocked(*t);
  }
}

absl::StatusOr<bool> ShardStore::Initialize(const JobConfig& job,
                                            const std::vector<DenseInit>& dense,
                                            const std::vector<EmbeddingInit>& embeddings,
                                            bool await_restore) {
  absl::MutexLock lock(&init_mu_);
  if (initialized_.load()) return false;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt,
                           optim::CreateOptimizer(job.optimizer));
  PSTRAIN_RETURN_IF_ERROR(CheckReplicas(job));
  std::vector<std::unique_ptr<StoredTensor>> built;
  std::map<std::string, StoredTensor*, std::less<>> keys;
  auto add = [&](std::unique_ptr<StoredTensor> t) -> absl::Status {
    t->index = static_cast<int>(built.size());
    if (!keys.emplace(t->key, t.get()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t->key, " appears twice in CreateVariables"));
    }
    t->seed = job.seed;
    if (t->embedding) t->slots = opt->num_slots();
    absl::MutexLock tl(&t->mu);
    InitRoundsLocked(*t, job.num_replicas);
    built.push_back(std::move(t));
    return absl::OkStatus();
  };
  std::vector<StreamFill> stream_fills;
  for (const DenseInit& d : dense) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<StoredTensor> t,
                             BuildDense(d, job, ps_index_, *opt, &stream_fills));
    PSTRAIN_RETURN_IF_ERROR(add(std::move(t)));
  }
  // The slices of the job's initial stream, in draw order: each PS reads
  // the stream once up to its last slice.
  std::sort(stream_fills.begin(), stream_fills.end(),
            [](const StreamFill& a, const StreamFill& b) { return a.draw() < b.draw(); });
  InitialStream stream(job.seed);
  for (const StreamFill& f : stream_fills) {
    absl::MutexLock tl(&f.tensor->mu);
    f.init.FillFrom(stream, f.first, f.n, f.tensor->data.data());
  }
  for (const EmbeddingInit& e : embeddings) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<StoredTensor> t, BuildEmbedding(e, job));
    PSTRAIN_RETURN_IF_ERROR(add(std::move(t)));
  }
  job_ = job;
  aggregate_ = job.replicas_to_aggregate > 0 ? job.replicas_to_aggregate : job.num_replicas;
  tensors_ = std::move(built);
  by_key_ = std::move(keys);
  optimizer_ = std::move(opt);
  rules_ = std::make_unique<UpdateRules>(optimizer_.get(), aggregate_,
                                         job.optimizer.dense_table_updates);
  generation_.store(job.generation, std::memory_order_release);
  initialized_.store(true, std::memory_order_release);
  ready_.store(!await_restore, std::memory_order_release);
  return true;
}

absl::StatusOr<StoredTensor*> ShardStore::Find(absl::string_view key) const {
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

struct ShardStore::PushPlan {
  std::vector<StoredTensor*> targets;
  // Tensor i's gradient is payload bytes [offsets[i], offsets[i + 1]).
  std::vector<int64_t> offsets;
  // Dense tensors applied on arrival stream their gradient from the payload
  // in L1-sized runs instead of going through scratch.
  std::vector<char> streamed;
  // Checked run by run as it is applied (PushBatch::read_back_in_payload
  // with an optimizer that can exchange).
  bool exchange = false;
  // Gradients applied from memory (tables, dense sync) in scratch at
  // offsets[i] / 4; a table's distinct ids, their rows merged.
  float* scratch = nullptr;
  std::vector<absl::Span<const int64_t>> unique_ids;
  std::vector<std::vector<int64_t>> merged_ids;  // what unique_ids view, when merged
  // Per tensor: taken (true) or dropped as stale.
  std::vector<bool> applied;
  // Per tensor: a repeat of a push it applied before (PushBatch::push_number),
  // answered without applying it again.
  std::vector<char> repeat;
  bool any_repeat = false;
};

absl::StatusOr<ShardStore::PushPlan> ShardStore::ResolvePush(const PushBatch& batch,
                                                             const Payload& payload) const {
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
  if (!initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: the chief has not initialised them"));
  }
  if (!batch.consistency.empty() && batch.consistency != job_.consistency.ToString()) {
    return absl::FailedPreconditionError(absl::StrCat("push is for a ", batch.consistency,
                                                      " job but this job runs ",
                                                      job_.consistency.ToString()));
  }
  if (batch.replica < 0 || batch.replica >= job_.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", batch.replica,
                                                   " is out of range: the job has ",
                                                   job_.num_replicas, " replicas"));
  }
  const size_t n = batch.tensors.size();
  PushPlan plan;
  plan.targets.resize(n);
  plan.offsets.assign(n + 1, 0);
  plan.streamed.resize(n);
  plan.unique_ids.resize(n);
  plan.merged_ids.resize(n);
  plan.applied.assign(n, true);
  for (size_t i = 0; i < n; ++i) {
    const TensorRef& ref = batch.tensors[i];
    PSTRAIN_ASSIGN_OR_RETURN(plan.targets[i], Find(ref.key));
    if (plan.targets[i]->update == VariableUpdate::kFrozen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push names ", ref.key, ", which is frozen (its layer has trainable: false)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (plan.targets[j] == plan.targets[i]) {
        return absl::InvalidArgumentError(absl::StrCat("push names ", ref.key, " twice"));
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes,
                             TransferBytes(*plan.targets[i], ref.ids, ps_index_, num_ps_));
    if (ref.bytes >= 0 && ref.bytes != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient for ", ref.key, " has ", ref.bytes, " bytes, expected ", bytes));
    }
    plan.offsets[i + 1] = plan.offsets[i] + bytes;
    plan.streamed[i] = !plan.targets[i]->embedding &&
                       plan.targets[i]->consistency.mode != Consistency::Mode::kSync;
  }
  if (plan.offsets[n] != payload.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push payload has ", payload.size(), " bytes but its tensors need ", plan.offsets[n]));
  }
  if (batch.read_back != nullptr || batch.read_back_in_payload != nullptr) {
    if (batch.read_back_in_payload != nullptr &&
        (batch.read_back != nullptr || batch.read_back_in_payload != &payload ||
         !payload.writable() || batch.read_back_in_place == nullptr)) {
      return absl::InternalError(
          "read_back_in_payload must be the pushed payload, writable, with "
          "read_back_in_place set and read_back unset");
    }
    for (size_t i = 0; i < n; ++i) {
      if (!plan.streamed[i] || plan.targets[i]->consistency.mode != Consistency::Mode::kAsync) {
        return absl::InternalError("read-back push of a tensor that is not dense and async");
      }
    }
  }
  plan.exchange = batch.read_back_in_payload != nullptr;
  for (const StoredTensor* t : plan.targets) {
    plan.exchange = plan.exchange && rules_->RuleOf(*t).can_exchange();
  }
  return plan;
}

absl::Status ShardStore::StageGradients(const PushBatch& batch, const Payload& payload,
                                        PushPlan& plan) const {
  std::vector<float>& scratch = Scratch();
  const size_t n = batch.tensors.size();
  const size_t floats_in_all = static_cast<size_t>(plan.offsets[n] / 4);
  if (scratch.size() < floats_in_all) scratch.resize(floats_in_all);
  plan.scratch = scratch.data();
  for (size_t i = 0; i < n; ++i) {
    const TensorRef& ref = batch.tensors[i];
    const int64_t floats = (plan.offsets[i + 1] - plan.offsets[i]) / 4;
    if (plan.streamed[i]) {
      if (plan.exchange) continue;  // checked as it is applied
      PSTRAIN_RETURN_IF_ERROR(CheckGradientInPlace(payload, plan.offsets[i], floats, ref.key));
      continue;
    }
    float* g = plan.scratch + plan.offsets[i] / 4;
    const int64_t bad = CopyFinite(payload, plan.offsets[i], floats, g);
    if (bad >= 0) return NonFiniteGradient(ref.key, g[bad], bad);
    if (plan.targets[i]->embedding) {
      if (ref.distinct_ids) {
        plan.unique_ids[i] = ref.ids;
      } else {
        MergeRepeatedRows(ref.ids, plan.targets[i]->dim, g, &plan.merged_ids[i]);
        plan.unique_ids[i] = plan.merged_ids[i];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShardStore::AdmitLocked(const PushBatch& batch, PushPlan& plan) const {
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    const StoredTensor& t = *plan.targets[i];
    if (t.embedding) {
      PSTRAIN_RETURN_IF_ERROR(
          CheckRowLimitLocked(t, plan.unique_ids[i], max_table_rows_, ps_index_));
    }
    PSTRAIN_ASSIGN_OR_RETURN(plan.applied[i], AdmitPushLocked(t, batch.tensors[i].version,
                                                              batch.replica, batch.stop_step));
  }
  plan.repeat.assign(plan.targets.size(), 0);
  plan.any_repeat = false;
  if (batch.push_number <= 0) return absl::OkStatus();
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    const StoredTensor& t = *plan.targets[i];
    if (t.embedding || t.consistency.mode == Consistency::Mode::kSync) continue;
    if (batch.replica < static_cast<int>(t.replica_pushes.size()) &&
        t.replica_pushes[batch.replica] >= batch.push_number) {
      plan.repeat[i] = 1;
      plan.any_repeat = true;
    }
  }
  return absl::OkStatus();
}

void ShardStore::AnswerRepeatLocked(const PushBatch& batch, const PushPlan& plan, size_t i) {
  StoredTensor& t = *plan.targets[i];
  t.repeated.fetch_add(1, std::memory_order_relaxed);
  const char* values = reinterpret_cast<const char*>(t.data.data());
  if (batch.read_back != nullptr) {
    std::memcpy(batch.read_back + plan.offsets[i], values, t.bytes);
  } else if (batch.read_back_in_payload != nullptr && t.bytes > 0) {
    batch.read_back_in_payload->RewriteFloatRuns(
        plan.offsets[i], t.bytes / 4, t.bytes / 4, [&](int64_t at, char* grad, int64_t count) {
          std::memcpy(grad, values + at * 4, count * 4);
        });
  }
  if (batch.read_back_versions != nullptr) {
    batch.read_back_versions->push_back({t.updates, t.bytes});
  }
}

absl::StatusOr<bool> ShardStore::ApplyExchangingLocked(const PushBatch& batch, PushPlan& plan) {
  // Every tensor is dense and async here (ResolvePush).
  PSTRAIN_RETURN_IF_ERROR(
      rules_->ExchangeLocked(plan.targets, *batch.read_back_in_payload, plan.offsets));
  bool progress = false;
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    StoredTensor& t = *plan.targets[i];
    CountPushLocked(t, batch.tensors[i].version, batch.replica);
    ++t.updates;
    progress |= FinishUpdateLocked(t, batch.replica);
    if (batch.read_back_versions != nullptr) {
      batch.read_back_versions->push_back({t.updates, t.bytes});
    }
    batch.read_back_in_place->held.push_back(HoldValuesLocked(t));
  }
  return progress;
}

bool ShardStore::ApplyAllLocked(const PushBatch& batch, const Payload& payload, PushPlan& plan) {
  bool progress = false;
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    StoredTensor& t = *plan.targets[i];
    const TensorRef& ref = batch.tensors[i];
    if (!plan.applied[i]) {
      DropStaleLocked(t, ref.version, batch.replica);
      continue;
    }
    if (plan.repeat[i]) {
      AnswerRepeatLocked(batch, plan, i);
      continue;
    }
    if (!plan.streamed[i]) {
      progress |= rules_->ApplyLocked(t, plan.unique_ids[i], ref.version, batch.replica,
                                      plan.scratch + plan.offsets[i] / 4);
      continue;
    }
    char* out = batch.read_back == nullptr ? nullptr : batch.read_back + plan.offsets[i];
    progress |= rules_->ApplyStreamedLocked(t, ref.version, batch.replica, payload, plan.offsets[i],
                                            out, batch.read_back_in_payload);
    if (batch.read_back_versions != nullptr) {
      batch.read_back_versions->push_back({t.updates, t.bytes});
    }
  }
  if (batch.read_back_in_payload != nullptr) batch.read_back_in_place->in_payload = true;
  return progress;
}

absl::StatusOr<std::vector<bool>> ShardStore::Push(const PushBatch& batch, const Payload& payload) {
  PSTRAIN_ASSIGN_OR_RETURN(PushPlan plan, ResolvePush(batch, payload));
  PSTRAIN_RETURN_IF_ERROR(StageGradients(batch, payload, plan));
  // Waits here while a checkpoint holds this PS's pushes, unless the
  // caller was admitted past the hold already.
  std::optional<PushHold::Pass> pass;
  if (!batch.admitted) pass.emplace(push_hold_.Enter());
  // Every target locked in index order while its state is checked and the
  // gradients applied.
  std::vector<StoredTensor*> order = plan.targets;
  std::sort(order.begin(), order.end(),
            [](const StoredTensor* a, const StoredTensor* b) { return a->index < b->index; });
  for (StoredTensor* t : order) t->mu.Lock();
  absl::StatusOr<bool> progress = false;
  absl::Status admitted = AdmitLocked(batch, plan);
  if (admitted.ok() && plan.any_repeat && plan.exchange) {
    // Exchanging applies every tensor of the batch in one pass; with a
    // repeat among them the batch is applied tensor by tensor, its new
    // values written over the gradient as they are, those gradients
    // checked first (exchanging checks them as it goes).
    plan.exchange = false;
    for (size_t i = 0; i < plan.targets.size() && admitted.ok(); ++i) {
      if (plan.repeat[i]) continue;
      admitted = CheckGradientInPlace(payload, plan.offsets[i],
                                      (plan.offsets[i + 1] - plan.offsets[i]) / 4,
                                      batch.tensors[i].key);
    }
  }
  if (!admitted.ok()) {
    progress = admitted;
  } else if (plan.exchange) {
    progress = ApplyExchangingLocked(batch, plan);
  } else {
    progress = ApplyAllLocked(batch, payload, plan);
  }
  for (StoredTensor* t : order) t->mu.Unlock();
  if (!progress.ok()) return progress.status();
  if (*progress) wait_list_.Notify();
  return plan.applied;
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
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
  int64_t total = 0;
  for (const TensorRef& ref : batch.tensors) {
    PSTRAIN_ASSIGN_OR_RETURN(StoredTensor * t, Find(ref.key));
    PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes, TransferBytes(*t, ref.ids, ps_index_, num_ps_));
    total += bytes;
  }
  // Replica -1 is an observer (the chief, tools): it reads without waiting.
  if (initialized() && (batch.replica < -1 || batch.replica >= job_.num_replicas)) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", batch.replica,
                                                   " is out of range: the job has ",
                                                   job_.num_replicas, " replicas"));
  }
  return total;
}

absl::StatusOr<bool> ShardStore::TryPull(const PullBatch& batch, char* out,
                                         std::vector<Pulled>* pulled, std::string* waiting_for) {
  // First: a pull parked before a restore must fail, not wait for a step
  // the restored values will not reach in its generation.
  PSTRAIN_RETURN_IF_ERROR(CheckGeneration(batch.generation));
  std::vector<StoredTensor*> targets;
  targets.reserve(batch.tensors.size());
  for (const TensorRef& ref : batch.tensors) {
    PSTRAIN_ASSIGN_OR_RETURN(StoredTensor * t, Find(ref.key));
    PSTRAIN_RETURN_IF_ERROR(TransferBytes(*t, ref.ids, ps_index_, num_ps_).status());
    targets.push_back(t);
  }
  const PullWait wait{batch.replica, batch.min_step, batch.stop_step};
  for (StoredTensor* t : targets) {
    if (t->consistency.mode == Consistency::Mode::kAsync) continue;
    absl::MutexLock lock(&t->mu);
    if (!ReadyLocked(*t, wait, job_.num_replicas, aggregate_, waiting_for)) return false;
  }
  pulled->clear();
  for (size_t i = 0; i < targets.size(); ++i) {
    StoredTensor& t = *targets[i];
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
        ParallelFor(t.bytes / 4, kParallelGrain,
                    [&](int64_t b, int64_t e) { std::memcpy(dst + b * 4, src + b, (e - b) * 4); });
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
  // untouched table must not hold the step back). Frozen tensors take no
  // pushes and never count.
  auto frozen = [](const StoredTensor& t) { return t.update == VariableUpdate::kFrozen; };
  bool any_dense = false, all_frozen = !tensors_.empty();
  for (const auto& t : tensors_) {
    any_dense |= !t->embedding && !frozen(*t);
    all_frozen = all_frozen && frozen(*t);
  }
  if (all_frozen) return kNoStep;
  int64_t sync_min = -1, ssp_min = -1, async_max = 0;
  for (const auto& t : tensors_) {
    if (frozen(*t) || (any_dense && t->embedding)) continue;
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
    s.repeated_pushes = t->repeated.load(std::memory_order_relaxed);
    for (int b = 0; b < kStalenessBuckets; ++b) {
      s.staleness[b] = t->staleness[b].load(std::memory_order_relaxed);
    }
    if (!t->embedding) {
      absl::MutexLock lock(&t->mu);
      s.replica_pushes = t->replica_pushes;
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<ckpt::ShardContents> ShardStore::Snapshot(
    int64_t step, const std::function<void()>& after_cut) const {
  if (!initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps:", ps_index_, " has no variables yet: nothing to checkpoint"));
  }
  ckpt::ShardContents shard;
  shard.header.set_step(step);
  shard.header.set_ps_index(ps_index_);
  shard.header.set_num_ps(num_ps_);
  shard.header.set_optimizer(job_.optimizer.name);
  shard.header.set_num_slots(optimizer_->num_slots());
  // One moment for every dense tensor and every table that is not async:
  // all locked (in index order) only while each dense tensor's buffer is
  // held (its next write goes to a copy, BeforeWriteLocked) and those tables
  // are copied. The dense bytes are copied afterwards with no lock held, so
  // pushes go on meanwhile. An async table, whose updates keep no step with
  // the rest, is copied under its own lock alone.
  const size_t n = tensors_.size();
  std::vector<HeldBytes> held(n);
  std::vector<int64_t> updates(n, 0);
  std::vector<std::vector<int64_t>> replica_pushes(n);
  shard.tensors.resize(n);
  auto alone = [](const StoredTensor& t) {
    return t.embedding && t.consistency.mode == Consistency::Mode::kAsync;
  };
  for (const auto& t : tensors_) t->mu.Lock();
  for (size_t i = 0; i < n; ++i) {
    StoredTensor& t = *tensors_[i];
    if (!t.embedding) {
      held[i] = HoldDataLocked(t, static_cast<int64_t>(t.data.size() * sizeof(float)));
      updates[i] = t.updates;
      replica_pushes[i] = t.replica_pushes;
    } else if (!alone(t)) {
      shard.tensors[i] = RecordOfLocked(t);
    }
  }
  for (auto it = tensors_.rbegin(); it != tensors_.rend(); ++it) (*it)->mu.Unlock();
  if (after_cut) after_cut();
  for (size_t i = 0; i < n; ++i) {
    StoredTensor& t = *tensors_[i];
    if (!t.embedding) {
      shard.tensors[i] = RecordOfDense(t, updates[i], held[i]);
      shard.tensors[i].mutable_replica_pushes()->Add(replica_pushes[i].begin(),
                                                     replica_pushes[i].end());
      held[i] = HeldBytes();  // the tensor's next write is in place again
    } else if (alone(t)) {
      absl::MutexLock lock(&t.mu);
      shard.tensors[i] = RecordOfLocked(t);
    }
  }
  return shard;
}

absl::Status ShardStore::Restore(const ckpt::ShardContents& shard, int64_t generation) {
  if (!initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps:", ps_index_, " has no variables yet: create them before restoring"));
  }
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint for ps:", shard.header.ps_index(), " of ",
                                            shard.header.num_ps(), " at step ", shard.header.step(),
                                            ": ", what));
  };
  if (shard.header.ps_index() != ps_index_ || shard.header.num_ps() != num_ps_) {
    return bad(absl::StrCat("this is ps:", ps_index_, " of ", num_ps_));
  }
  // A checkpoint that reads back whole but does not fit this job's
  // variables was written for another model: not damaged, and not to be
  // set aside as if it were.
  auto other = [&](absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint for ps:", shard.header.ps_index(), " of ", shard.header.num_ps(),
                     " at step ", shard.header.step(), " is of another model: ", what));
  };
  if (shard.header.num_slots() != optimizer_->num_slots()) {
    return other(absl::StrCat("it holds ", shard.header.num_slots(), " optimizer slots (",
                              shard.header.optimizer(), ") but this job's ", job_.optimizer.name,
                              " has ", optimizer_->num_slots()));
  }
  std::vector<const v1::TensorCheckpoint*> source(tensors_.size(), nullptr);
  for (const v1::TensorCheckpoint& c : shard.tensors) {
    auto t = Find(c.key());
    if (!t.ok()) return other(absl::StrCat("it holds ", c.key(), ", which this job does not have"));
    if (source[(*t)->index] != nullptr) return bad(absl::StrCat(c.key(), " appears twice"));
    if (absl::Status fits = CheckRecordFits(**t, c, ps_index_, num_ps_); !fits.ok()) {
      return fits.code() == absl::StatusCode::kFailedPrecondition ? other(fits.message())
                                                                  : bad(fits.message());
    }
    source[(*t)->index] = &c;
  }
  for (const auto& t : tensors_) {
    if (source[t->index] == nullptr) return other(absl::StrCat("it lacks ", t->key));
  }
  for (const auto& t : tensors_) t->mu.Lock();
  for (const auto& t : tensors_) {
    LoadRecordLocked(*t, *source[t->index]);
    ResetRoundsLocked(*t);
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
  if (generation == 0) return absl::OkStatus();
  if (!initialized()) {
    // A replica that trained on generation `generation` meets a PS that
    // started again since, before the chief restored it: Aborted, as for a
    // restore, so that the replica waits for one instead of failing.
    return absl::AbortedError(absl::StrCat(
        "ps:", ps_index_, " has no variables: it started again since this request's generation ",
        generation, " was served; wait for the chief to restore it"));
  }
  const int64_t mine = generation_.load(std::memory_order_acquire);
  if (generation == mine) return absl::OkStatus();
  return absl::AbortedError(
      absl::StrCat("ps:", ps_index_, " was restored from the checkpoint at step ", restored_step(),
                   " (generation ", mine, "); this request is of generation ", generation,
                   ": pull again and carry on from there"));
}

std::vector<ckpt::TargetTensor> ShardStore::Layout() const {
  std::vector<ckpt::TargetTensor> out;
  if (!initialized()) return out;
  for (const auto& t : tensors_) out.push_back(TargetOf(*t));
  return out;
}

}  // namespace pstrain::ps
