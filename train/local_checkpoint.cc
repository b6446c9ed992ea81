#include "train/local_checkpoint.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/commit.h"
#include "checkpoint/reshard.h"
#include "common/checkpoint_layout.h"
#include "common/status_macros.h"

namespace pstrain::train {
namespace {

int NumSlots(const LocalModelState& state) { return static_cast<int>(state.slots->size()); }

// Where each variable's values start in `params`, by name.
std::map<std::string, int64_t> OffsetsByName(const LocalModelState& state) {
  std::map<std::string, int64_t> out;
  for (size_t v = 0; v < state.placement.variables.size(); ++v) {
    out[state.placement.variables[v].name] = state.offsets[v];
  }
  return out;
}

// The tensors of one PS holding every variable, as the PS store lays them out.
std::vector<ckpt::TargetTensor> Targets(const LocalModelState& state) {
  std::vector<ckpt::TargetTensor> out;
  for (const SliceDef& s : state.placement.slices) {
    ckpt::TargetTensor t;
    t.key = s.key();
    t.variable = s.variable;
    t.row_begin = s.row_begin;
    t.row_end = s.row_end;
    t.row_elements = s.row_elements;
    out.push_back(std::move(t));
  }
  for (const VariableDef& v : state.placement.embeddings) {
    ckpt::TargetTensor t;
    t.key = v.name;
    t.variable = v.name;
    t.embedding = true;
    t.dim = v.shape[1];
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

absl::Status SaveLocalCheckpoint(const std::string& dir, int64_t step, const LocalModelState& state,
                                 int keep, bool final) {
  ckpt::ShardContents shard;
  shard.header.set_step(step);
  shard.header.set_ps_index(0);
  shard.header.set_num_ps(1);
  shard.header.set_optimizer(state.optimizer);
  shard.header.set_num_slots(NumSlots(state));
  const std::map<std::string, int64_t> offsets = OffsetsByName(state);
  for (const SliceDef& s : state.placement.slices) {
    // Values, then each slot: the slice's planes, as a PS writes them.
    v1::TensorCheckpoint& t = shard.tensors.emplace_back();
    t.set_key(s.key());
    t.set_updates(step);  // every local step updates every dense variable
    t.set_elements(s.elements());
    t.set_variable(s.variable);
    t.set_row_begin(s.row_begin);
    t.set_row_end(s.row_end);
    t.set_row_elements(s.row_elements);
    const int64_t begin = offsets.at(s.variable) + s.element_offset();
    std::string* data = t.mutable_data();
    data->reserve(s.bytes() * (1 + NumSlots(state)));
    data->append(reinterpret_cast<const char*>(state.params->data() + begin), s.bytes());
    for (const std::vector<float>& slot : *state.slots) {
      data->append(reinterpret_cast<const char*>(slot.data() + begin), s.bytes());
    }
  }
  for (int i = 0; i < state.tables->size(); ++i) {
    const LocalTable& table = (*state.tables)[i];
    const LocalTable::StoredRows rows = table.Stored();
    v1::TensorCheckpoint& t = shard.tensors.emplace_back();
    t.set_key(table.name());
    t.set_embedding(true);
    t.set_dim(table.dim());
    int64_t updates = 0;
    for (int64_t u : rows.updates) updates += u;
    t.set_updates(updates);
    t.mutable_row_ids()->Add(rows.ids.begin(), rows.ids.end());
    t.mutable_row_updates()->Add(rows.updates.begin(), rows.updates.end());
    t.set_data(reinterpret_cast<const char*>(rows.data.data()), rows.data.size() * sizeof(float));
  }
  auto written = ckpt::WriteShard(ShardPath(dir, step, 0, 1), std::move(shard));
  absl::Status s = written.status();
  if (s.ok()) {
    s = ckpt::CommitCheckpoint(dir, step,
                               {{ShardPath(dir, step, 0, 1), written->bytes, written->crc}}, keep,
                               final, /*spare_unscored=*/false);
  }
  if (!s.ok()) ckpt::DiscardCheckpoint(dir, step);
  return s;
}

absl::StatusOr<int64_t> RestoreLocalCheckpoint(const std::string& dir,
                                               const LocalModelState& state) {
  const std::vector<CompleteCheckpoint> complete = CompleteCheckpoints(dir, nullptr);
  if (complete.empty()) return 0;
  const CompleteCheckpoint& newest = complete[0];
  PSTRAIN_ASSIGN_OR_RETURN(
      ckpt::ShardContents shard,
      ckpt::ReadCheckpointFor(dir, newest.step, newest.num_ps, 0, 1, Targets(state)));
  const std::string where = CheckpointDir(dir, newest.step);
  const int slots = NumSlots(state);
  if (shard.header.num_slots() != slots || shard.header.optimizer() != state.optimizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " was written with ", shard.header.optimizer(), " (", shard.header.num_slots(),
        " optimizer slots); this run uses ", state.optimizer, " (", slots, ")"));
  }
  std::map<std::string, const v1::TensorCheckpoint*> by_key;
  for (const v1::TensorCheckpoint& t : shard.tensors) by_key[t.key()] = &t;
  // Every record is checked before anything is loaded.
  for (const SliceDef& s : state.placement.slices) {
    auto it = by_key.find(s.key());
    if (it == by_key.end() || it->second->embedding()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " holds no dense ", s.key(), " of this model"));
    }
    if (static_cast<int64_t>(it->second->data().size()) != s.bytes() * (1 + slots)) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": ", s.key(), " holds ", it->second->data().size(),
                       " bytes, this model's ", s.elements(), " values and their ", slots,
                       " optimizer slots take ", s.bytes() * (1 + slots)));
    }
  }
  for (int i = 0; i < state.tables->size(); ++i) {
    const LocalTable& table = (*state.tables)[i];
    auto it = by_key.find(table.name());
    if (it == by_key.end() || !it->second->embedding()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " holds no embedding table ", table.name()));
    }
    if (absl::Status s = ckpt::CheckTableRecord(*it->second, slots, table.dim()); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": ", s.message()));
    }
  }
  // Tables first: the only step that can still refuse (an id out of range).
  for (int i = 0; i < state.tables->size(); ++i) {
    LocalTable& table = (*state.tables)[i];
    const v1::TensorCheckpoint& t = *by_key.at(table.name());
    const auto* floats = reinterpret_cast<const float*>(t.data().data());
    absl::Status s = table.Restore(
        t.row_ids(), absl::MakeConstSpan(floats, t.data().size() / sizeof(float)), t.row_updates());
    if (!s.ok()) return absl::DataLossError(absl::StrCat(where, ": ", s.message()));
  }
  const std::map<std::string, int64_t> offsets = OffsetsByName(state);
  for (const SliceDef& s : state.placement.slices) {
    const char* data = by_key.at(s.key())->data().data();
    const int64_t begin = offsets.at(s.variable) + s.element_offset();
    std::memcpy(state.params->data() + begin, data, s.bytes());
    for (int k = 0; k < slots; ++k) {
      std::memcpy((*state.slots)[k].data() + begin, data + (k + 1) * s.bytes(), s.bytes());
    }
  }
  return newest.step;
}

}  // namespace pstrain::train
