#include "client/in_process_store.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "cluster/global_step.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/payload.h"
#include "base/status_macros.h"

namespace pstrain::client {

absl::StatusOr<std::unique_ptr<InProcessStore>> InProcessStore::Create(
    PsLookup lookup, const Placement& placement, std::vector<int64_t> offsets,
    const InProcessOptions& options) {
  if (placement.num_ps < 1) {
    return absl::InvalidArgumentError("an in-process store needs at least one ps");
  }
  if (offsets.size() < placement.variables.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", placement.variables.size(),
                                                   " variables but ", offsets.size(),
                                                   " offsets were given"));
  }
  return std::unique_ptr<InProcessStore>(
      new InProcessStore(std::move(lookup), placement, std::move(offsets), options));
}

absl::StatusOr<std::unique_ptr<InProcessStore>> InProcessStore::Create(
    std::vector<std::shared_ptr<ps::ShardStore>> stores, const Placement& placement,
    std::vector<int64_t> offsets, const InProcessOptions& options) {
  if (static_cast<int>(stores.size()) != placement.num_ps) {
    return absl::InvalidArgumentError(absl::StrCat("placement is for ", placement.num_ps,
                                                   " ps but ", stores.size(),
                                                   " stores were given"));
  }
  PsLookup lookup = [stores = std::move(stores)](
                        int ps) -> absl::StatusOr<std::shared_ptr<ps::ShardStore>> {
    return stores[ps];
  };
  return Create(std::move(lookup), placement, std::move(offsets), options);
}

InProcessStore::InProcessStore(PsLookup lookup, const Placement& placement,
                               std::vector<int64_t> offsets, const InProcessOptions& options)
    : lookup_(std::move(lookup)),
      placement_(placement),
      offsets_(std::move(offsets)),
      options_(options) {
  const int n = placement.num_ps;
  slices_on_.resize(n);
  keys_.resize(n);
  slice_variable_.resize(n);
  versions_.resize(n);
  for (int ps = 0; ps < n; ++ps) {
    slices_on_[ps] = placement.SlicesOn(ps);
    for (const SliceDef& s : slices_on_[ps]) {
      keys_[ps].push_back(s.key());
      for (size_t v = 0; v < placement.variables.size(); ++v) {
        if (placement.variables[v].name == s.variable) {
          slice_variable_[ps].push_back(static_cast<int>(v));
          break;
        }
      }
    }
    versions_[ps].assign(slices_on_[ps].size(), 0);
  }
  table_versions_.assign(placement.embeddings.size(), std::vector<int64_t>(n, 0));
}

std::string InProcessStore::PsName(int ps) const { return absl::StrCat("ps:", ps, " (in process)"); }

absl::StatusOr<std::shared_ptr<ps::ShardStore>> InProcessStore::StoreOf(int ps) {
  absl::StatusOr<std::shared_ptr<ps::ShardStore>> store = lookup_(ps);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat(PsName(ps), ": ", store.status().message()));
  }
  return store;
}

absl::Status InProcessStore::WaitUntilReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string missing;
  while (true) {
    missing.clear();
    int64_t generation = -1;
    int64_t restored = 0;
    bool one_generation = true;
    for (int ps = 0; ps < placement_.num_ps; ++ps) {
      absl::StatusOr<std::shared_ptr<ps::ShardStore>> store = StoreOf(ps);
      if (!store.ok()) {
        absl::StrAppend(&missing, missing.empty() ? "" : "; ", store.status().message());
        continue;
      }
      if (!(*store)->ready()) {
        absl::StrAppend(&missing, missing.empty() ? "" : "; ", PsName(ps),
                        ": no initialised variables");
        continue;
      }
      if (generation >= 0 && (*store)->generation() != generation) one_generation = false;
      generation = std::max(generation, (*store)->generation());
      restored = std::max(restored, (*store)->restored_step());
    }
    if (missing.empty() && one_generation) {
      generation_ = generation;
      restored_step_ = restored;
      return absl::OkStatus();
    }
    if (missing.empty()) missing = "the ps serve different generations";
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the ps were not ready within ",
                                                      absl::FormatDuration(timeout), ": ",
                                                      missing));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

absl::StatusOr<int64_t> InProcessStore::ReplicaPushes(int replica) {
  std::optional<int64_t> fewest;
  for (int ps = 0; ps < placement_.num_ps; ++ps) {
    PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<ps::ShardStore> store, StoreOf(ps));
    for (const ps::TensorStats& t : store->Stats()) {
      const bool table = std::any_of(placement_.embeddings.begin(), placement_.embeddings.end(),
                                     [&](const VariableDef& v) { return v.name == t.key; });
      if (table) continue;
      if (replica < 0 || replica >= static_cast<int>(t.replica_pushes.size())) {
        return absl::NotFoundError(absl::StrCat(PsName(ps), " keeps no count of replica ",
                                                replica, "'s pushes to ", t.key));
      }
      const int64_t n = t.replica_pushes[replica];
      fewest = fewest.has_value() ? std::min(*fewest, n) : n;
    }
  }
  if (!fewest.has_value()) return absl::NotFoundError("the model has no dense variable");
  return *fewest;
}

ParameterStore::Ticket InProcessStore::StartDense(absl::Span<const int> variables,
                                                  const float* grads, float* params,
                                                  Queue queue) {
  if (queues_.failed(queue)) return queues_.Record(queue, int64_t{0});
  return queues_.Record(queue, Dense(variables, grads, params));
}

ParameterStore::Ticket InProcessStore::StartRows(absl::Span<const TableRows> push,
                                                 absl::Span<const TableRows> pull,
                                                 Queue queue) {
  if (queues_.failed(queue)) return queues_.Record(queue, int64_t{0});
  absl::Status s = Rows(push, pull);
  return queues_.Record(queue, s.ok() ? absl::StatusOr<int64_t>(int64_t{0}) : s);
}

absl::StatusOr<int64_t> InProcessStore::Wait(Ticket ticket) { return queues_.Wait(ticket); }

// Exchanges end as they start: there is nothing to wait for.
absl::Status InProcessStore::Drain() { return queues_.Clear(); }

absl::StatusOr<int64_t> InProcessStore::Dense(absl::Span<const int> variables, const float* grads,
                                              float* params) {
  std::vector<char> wanted;
  if (!variables.empty()) {
    wanted.assign(placement_.variables.size(), 0);
    for (int v : variables) {
      if (v < 0 || v >= static_cast<int>(wanted.size())) {
        return absl::InvalidArgumentError(absl::StrCat("variable index ", v,
                                                       " is out of range: the model has ",
                                                       wanted.size(), " variables"));
      }
      wanted[v] = 1;
    }
  }
  // The job's global step: the slowest PS's.
  int64_t step = -1;
  for (int ps = 0; ps < placement_.num_ps; ++ps) {
    DenseWork work{ps, {}};
    for (size_t k = 0; k < slices_on_[ps].size(); ++k) {
      if (wanted.empty() || wanted[slice_variable_[ps][k]]) {
        work.slices.push_back(static_cast<int>(k));
      }
    }
    if (work.slices.empty()) continue;
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t at, DenseOnPs(work, grads, params));
    step = SlowerStep(step, at);
  }
  return std::max<int64_t>(step, 0);
}

absl::StatusOr<int64_t> InProcessStore::DenseOnPs(const DenseWork& work, const float* grads,
                                                  float* params) {
  const int ps = work.ps;
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<ps::ShardStore> store, StoreOf(ps));
  // Where slice k's values lie in the caller's arrays, and whether this
  // PS's slices lie there back to back, as the store writes them.
  auto at = [&](int k) {
    return offsets_[slice_variable_[ps][k]] + slices_on_[ps][k].element_offset();
  };
  bool contiguous = true;
  int64_t bytes = 0;
  for (size_t i = 0; i < work.slices.size(); ++i) {
    const int k = work.slices[i];
    if (i > 0) {
      const int prev = work.slices[i - 1];
      contiguous &= at(k) == at(prev) + slices_on_[ps][prev].elements();
    }
    bytes += slices_on_[ps][k].bytes();
  }
  std::vector<ps::ShardStore::TensorRef> refs;
  for (int k : work.slices) refs.push_back({keys_[ps][k], {}, versions_[ps][k], -1});
  // Copies values the store wrote back to back (`from`) into the caller's
  // parameters, and keeps each slice's version.
  auto take = [&](const char* from, const std::vector<ps::ShardStore::Pulled>& pulled) {
    for (size_t i = 0; i < work.slices.size(); ++i) {
      const int k = work.slices[i];
      if (from != nullptr) {
        std::memcpy(params + at(k), from, slices_on_[ps][k].bytes());
        from += slices_on_[ps][k].bytes();
      }
      if (i < pulled.size()) versions_[ps][k] = pulled[i].version;
    }
  };
  char* into = nullptr;  // where the store writes pulled values
  if (params != nullptr) {
    if (contiguous) {
      into = reinterpret_cast<char*>(params + at(work.slices[0]));
    } else {
      if (static_cast<int64_t>(scratch_.size()) < bytes) scratch_.resize(bytes);
      into = scratch_.data();
    }
  }
  if (grads != nullptr) {
    ps::ShardStore::PushBatch push;
    push.replica = options_.replica;
    push.generation = generation_;
    push.stop_step = stop_step_;
    push.push_number = push_number();
    push.consistency = options_.consistency.ToString();
    push.tensors = refs;
    Payload payload;
    for (size_t i = 0; i < work.slices.size(); ++i) {
      const int k = work.slices[i];
      push.tensors[i].bytes = slices_on_[ps][k].bytes();
      payload.Append(reinterpret_cast<const char*>(grads + at(k)), slices_on_[ps][k].bytes());
    }
    std::vector<ps::ShardStore::Pulled> back;
    const bool read_back = params != nullptr && store->CanReadBack(push, refs);
    if (read_back) {
      push.read_back = into;
      push.read_back_versions = &back;
    }
    absl::StatusOr<std::vector<bool>> applied = store->Push(push, payload);
    if (!applied.ok()) {
      return absl::Status(applied.status().code(),
                          absl::StrCat(PsName(ps), ": ", applied.status().message()));
    }
    for (bool a : *applied) dropped_ += a ? 0 : 1;
    if (read_back) {
      take(contiguous ? nullptr : into, back);
      return store->global_step();
    }
  }
  if (params != nullptr) {
    ps::ShardStore::PullBatch pull;
    pull.replica = options_.replica;
    pull.generation = generation_;
    pull.stop_step = stop_step_;
    pull.tensors = std::move(refs);
    std::vector<ps::ShardStore::Pulled> pulled;
    PSTRAIN_RETURN_IF_ERROR(PullWaiting(*store, pull, into, &pulled));
    take(contiguous ? nullptr : into, pulled);
  }
  return store->global_step();
}

absl::Status InProcessStore::PullWaiting(ps::ShardStore& store,
                                         const ps::ShardStore::PullBatch& batch, char* out,
                                         std::vector<ps::ShardStore::Pulled>* pulled) {
  const int ps = store.ps_index();
  auto named = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(PsName(ps), ": ", s.message()));
  };
  PSTRAIN_RETURN_IF_ERROR(named(store.PullSize(batch).status()));
  std::string waiting_for;
  absl::StatusOr<bool> ready = store.TryPull(batch, out, pulled, &waiting_for);
  if (!ready.ok()) return named(ready.status());
  if (*ready) return absl::OkStatus();
  // Parked until a push readies it, or the wait's bound passes.
  const absl::Duration wait = store.initialized() && store.job().sync_wait > absl::ZeroDuration()
                                  ? store.job().sync_wait
                                  : options_.wait_timeout;
  absl::Notification done;
  absl::Status result;
  store.wait_list().RunWhenReady(
      [&]() {
        pulled->clear();
        absl::StatusOr<bool> r = store.TryPull(batch, out, pulled, &waiting_for);
        if (r.ok() && !*r) return false;
        result = r.status();
        done.Notify();
        return true;
      },
      store.clock()->Now() + wait,
      [&]() {
        pulled->clear();
        absl::StatusOr<bool> r = store.TryPull(batch, out, pulled, &waiting_for);
        if (!r.ok()) {
          result = r.status();
        } else if (!*r) {
          result = absl::DeadlineExceededError(
              absl::StrCat("pull waited ", absl::FormatDuration(wait), ": ", waiting_for));
        }
        done.Notify();
      });
  done.WaitForNotification();
  return named(result);
}

absl::Status InProcessStore::GroupRows(absl::Span<const TableRows> tables,
                                       std::vector<RowsOf>* out) const {
  const int n = placement_.num_ps;
  out->clear();
  for (const TableRows& t : tables) {
    RowsOf& g = out->emplace_back();
    g.index = -1;
    for (size_t e = 0; e < placement_.embeddings.size(); ++e) {
      if (placement_.embeddings[e].name == t.table) g.index = static_cast<int>(e);
    }
    if (g.index < 0) {
      return absl::NotFoundError(
          absl::StrCat("the model has no embedding table \"", t.table, "\""));
    }
    const VariableDef& def = placement_.embeddings[g.index];
    const Consistency& mode = def.consistency.value_or(options_.consistency);
    g.dim = def.row_elements();
    g.sync = mode.mode == Consistency::Mode::kSync;
    g.ids_on.resize(n);
    g.pos_on.resize(n);
    if (n == 1) {
      // Every row on the one PS, in the caller's order: nothing to gather.
      g.ids_on[0] = t.ids;
      continue;
    }
    g.own_ids.resize(n);
    for (size_t i = 0; i < t.ids.size(); ++i) {
      // A negative id goes to ps:0, which names it in its error.
      const int ps = t.ids[i] >= 0 ? EmbeddingOwner(t.ids[i], n) : 0;
      g.own_ids[ps].push_back(t.ids[i]);
      g.pos_on[ps].push_back(i);
    }
    for (int ps = 0; ps < n; ++ps) g.ids_on[ps] = g.own_ids[ps];
  }
  return absl::OkStatus();
}

absl::Status InProcessStore::Rows(absl::Span<const TableRows> push,
                                  absl::Span<const TableRows> pull) {
  std::vector<RowsOf> pushed, pulled;
  PSTRAIN_RETURN_IF_ERROR(GroupRows(push, &pushed));
  PSTRAIN_RETURN_IF_ERROR(GroupRows(pull, &pulled));
  for (int ps = 0; ps < placement_.num_ps; ++ps) {
    const bool pushes =
        std::any_of(pushed.begin(), pushed.end(), [ps](const RowsOf& g) { return g.Sends(ps); });
    const bool pulls =
        std::any_of(pulled.begin(), pulled.end(), [ps](const RowsOf& g) { return g.Sends(ps); });
    if (!pushes && !pulls) continue;
    PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<ps::ShardStore> store, StoreOf(ps));
    if (pushes) PSTRAIN_RETURN_IF_ERROR(PushRowsTo(*store, push, pushed));
    if (pulls) PSTRAIN_RETURN_IF_ERROR(PullRowsFrom(*store, pull, pulled));
  }
  return absl::OkStatus();
}

absl::Status InProcessStore::PushRowsTo(ps::ShardStore& store, absl::Span<const TableRows> push,
                                        const std::vector<RowsOf>& pushed) {
  const int ps = store.ps_index();
  ps::ShardStore::PushBatch batch;
  batch.replica = options_.replica;
  batch.generation = generation_;
  batch.stop_step = stop_step_;
  batch.consistency = options_.consistency.ToString();
  // The gradient rows this PS owns, from the caller's memory, one piece per
  // run of rows that lie side by side there.
  Payload payload;
  for (size_t t = 0; t < push.size(); ++t) {
    const RowsOf& g = pushed[t];
    if (!g.Sends(ps)) continue;
    const int64_t rows = static_cast<int64_t>(g.ids_on[ps].size());
    batch.tensors.push_back({push[t].table, g.ids_on[ps], table_versions_[g.index][ps],
                             rows * g.dim * 4, push[t].distinct});
    const char* grads = reinterpret_cast<const char*>(push[t].grads);
    if (g.pos_on[ps].empty()) {
      if (rows > 0) payload.Append(grads, rows * g.dim * 4);
      continue;
    }
    const std::vector<size_t>& pos = g.pos_on[ps];
    for (size_t k = 0; k < pos.size();) {
      size_t run = 1;
      while (k + run < pos.size() && pos[k + run] == pos[k] + run) ++run;
      payload.Append(grads + pos[k] * g.dim * 4, static_cast<int64_t>(run) * g.dim * 4);
      k += run;
    }
  }
  absl::StatusOr<std::vector<bool>> applied = store.Push(batch, payload);
  if (!applied.ok()) {
    return absl::Status(applied.status().code(),
                        absl::StrCat(PsName(ps), ": ", applied.status().message()));
  }
  for (bool a : *applied) dropped_ += a ? 0 : 1;
  return absl::OkStatus();
}

absl::Status InProcessStore::PullRowsFrom(ps::ShardStore& store, absl::Span<const TableRows> pull,
                                          const std::vector<RowsOf>& pulled) {
  const int ps = store.ps_index();
  ps::ShardStore::PullBatch batch;
  batch.replica = options_.replica;
  batch.generation = generation_;
  batch.stop_step = stop_step_;
  std::vector<size_t> tables;  // indices into `pull` of the refs, in order
  for (size_t t = 0; t < pull.size(); ++t) {
    if (!pulled[t].Sends(ps)) continue;
    batch.tensors.push_back({pull[t].table, pulled[t].ids_on[ps], 0, -1});
    tables.push_back(t);
  }
  // One table whose rows are the caller's, in order: straight into place.
  const bool direct = tables.size() == 1 && pulled[tables[0]].pos_on[ps].empty();
  char* into = nullptr;
  if (direct) {
    into = reinterpret_cast<char*>(pull[tables[0]].out);
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t bytes, store.PullSize(batch));
    if (static_cast<int64_t>(scratch_.size()) < bytes) scratch_.resize(bytes);
    into = scratch_.data();
  }
  std::vector<ps::ShardStore::Pulled> versions;
  PSTRAIN_RETURN_IF_ERROR(PullWaiting(store, batch, into, &versions));
  int64_t at = 0;
  for (size_t r = 0; r < tables.size(); ++r) {
    const size_t t = tables[r];
    const RowsOf& g = pulled[t];
    if (r < versions.size()) table_versions_[g.index][ps] = versions[r].version;
    if (direct) break;
    const int64_t row_bytes = g.dim * 4;
    if (g.pos_on[ps].empty()) {
      const int64_t bytes = static_cast<int64_t>(g.ids_on[ps].size()) * row_bytes;
      std::memcpy(pull[t].out, into + at, bytes);
      at += bytes;
      continue;
    }
    for (size_t pos : g.pos_on[ps]) {
      std::memcpy(pull[t].out + pos * g.dim, into + at, row_bytes);
      at += row_bytes;
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::client
