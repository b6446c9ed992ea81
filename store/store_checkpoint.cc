#include "store/store_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_shard.h"

namespace pstrain::ps {

namespace {

// A record of t with `updates` and the bytes [data, data + size): its
// values and slots (a table's rows of them).
v1::TensorCheckpoint RecordWith(const StoredTensor& t, int64_t updates, const char* data,
                                int64_t size) {
  v1::TensorCheckpoint c;
  c.set_key(t.key);
  c.set_embedding(t.embedding);
  c.set_updates(updates);
  c.set_data(std::string(data, size));
  if (!t.embedding) {
    c.set_elements(t.def.elements());
    c.set_variable(t.variable);
    c.set_row_begin(t.def.row_begin);
    c.set_row_end(t.def.row_end);
    c.set_row_elements(t.def.row_elements);
    if (t.update != VariableUpdate::kOptimizer) c.set_update(VariableUpdateName(t.update));
  }
  return c;
}

}  // namespace

v1::TensorCheckpoint RecordOfLocked(const StoredTensor& t) {
  v1::TensorCheckpoint c = RecordWith(t, t.updates, reinterpret_cast<const char*>(t.data.data()),
                                      static_cast<int64_t>(t.data.size() * sizeof(float)));
  if (t.embedding) {
    c.set_dim(t.dim);
    std::vector<int64_t> ids(t.row_updates.size());
    for (const auto& [id, row] : t.row_of) ids[row] = id;
    c.mutable_row_ids()->Add(ids.begin(), ids.end());
    c.mutable_row_updates()->Add(t.row_updates.begin(), t.row_updates.end());
  }
  return c;
}

v1::TensorCheckpoint RecordOfDense(const StoredTensor& t, int64_t updates, const HeldBytes& data) {
  return RecordWith(t, updates, data.data, data.size);
}

absl::Status CheckRecordFits(const StoredTensor& t, const v1::TensorCheckpoint& c, int ps_index,
                             int num_ps) {
  if (c.embedding() != t.embedding) {
    return absl::FailedPreconditionError(
        absl::StrCat(c.key(), " is ", c.embedding() ? "a table" : "dense", " there but not here"));
  }
  if (t.embedding) {
    if (absl::Status s = ckpt::CheckTableRecord(c, t.slots, t.dim); !s.ok()) return s;
    absl::flat_hash_set<int64_t> seen;
    for (int64_t id : c.row_ids()) {
      if (id < 0 || id >= t.vocabulary || EmbeddingOwner(id, num_ps) != ps_index) {
        return absl::DataLossError(
            absl::StrCat(c.key(), ": row id ", id, " does not belong on this PS"));
      }
      if (!seen.insert(id).second) {
        return absl::DataLossError(absl::StrCat(c.key(), ": row id ", id, " appears twice"));
      }
    }
    return absl::OkStatus();
  }
  const int per = 1 + t.slots;
  if (static_cast<int64_t>(c.data().size()) != t.def.elements() * per * 4) {
    return absl::FailedPreconditionError(absl::StrCat(
        c.key(), ": ", c.data().size(), " bytes, expected ", t.def.elements() * per * 4, " (",
        t.def.elements(), " values and their ", per - 1, " optimizer slots)"));
  }
  return absl::OkStatus();
}

void LoadRecordLocked(StoredTensor& t, const v1::TensorCheckpoint& c) {
  BeforeWriteLocked(t);
  t.data.resize(c.data().size() / sizeof(float));
  // A table without rows has no data (and data() may be null).
  if (!c.data().empty()) std::memcpy(t.data.data(), c.data().data(), c.data().size());
  t.updates = c.updates();
  if (t.embedding) {
    t.row_of.clear();
    for (int r = 0; r < c.row_ids_size(); ++r) t.row_of[c.row_ids(r)] = r;
    t.row_updates.assign(c.row_updates().begin(), c.row_updates().end());
    t.rows.store(c.row_ids_size(), std::memory_order_relaxed);
  }
  if (!t.embedding) {
    // Where each replica was in its schedule; unknown (empty) from a
    // checkpoint without the counts, or of another number of replicas.
    if (c.replica_pushes_size() == t.num_replicas) {
      t.replica_pushes.assign(c.replica_pushes().begin(), c.replica_pushes().end());
    } else {
      t.replica_pushes.clear();
    }
  }
  t.version.store(t.updates, std::memory_order_release);
}

ckpt::TargetTensor TargetOf(const StoredTensor& t) {
  ckpt::TargetTensor target;
  target.key = t.key;
  target.variable = t.variable;
  target.embedding = t.embedding;
  if (t.embedding) {
    target.dim = t.dim;
  } else {
    target.row_begin = t.def.row_begin;
    target.row_end = t.def.row_end;
    target.row_elements = t.def.row_elements;
    if (t.update != VariableUpdate::kOptimizer) target.update = VariableUpdateName(t.update);
  }
  return target;
}

}  // namespace pstrain::ps
