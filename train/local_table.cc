#include "train/local_table.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain::train {

absl::StatusOr<std::unique_ptr<LocalTable>> LocalTable::Create(const VariableDef& table,
                                                               uint64_t seed,
                                                               const OptimizerSpec* optimizer) {
  if (!table.embedding || table.shape.size() != 2 || table.shape[0] < 1 || table.shape[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(table.name, " is not an embedding table [vocabulary, dim]"));
  }
  auto init =
      optim::Initializer::Parse(table.initializer.empty() ? "uniform:0.05" : table.initializer);
  if (!init.ok()) return init.status();
  std::unique_ptr<optim::Optimizer> opt;
  if (optimizer != nullptr) {
    auto created = optim::CreateOptimizer(*optimizer);
    if (!created.ok()) return created.status();
    opt = *std::move(created);
  }
  const bool dense = optimizer != nullptr && optimizer->dense_table_updates;
  return std::unique_ptr<LocalTable>(new LocalTable(table, seed, *init, std::move(opt), dense));
}

LocalTable::LocalTable(const VariableDef& table, uint64_t seed, optim::Initializer init,
                       std::unique_ptr<optim::Optimizer> optimizer, bool dense)
    : name_(table.name),
      vocabulary_(table.shape[0]),
      dim_(table.shape[1]),
      seed_(seed),
      init_(init),
      optimizer_(std::move(optimizer)),
      dense_(dense),
      stride_(dim_ * (1 + (optimizer_ ? optimizer_->num_slots() : 0))) {}

absl::Status LocalTable::CheckIds(absl::Span<const int64_t> ids) const {
  for (int64_t id : ids) {
    if (id < 0 || id >= vocabulary_) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": id ", id, " is outside [0, ", vocabulary_, ")"));
    }
  }
  return absl::OkStatus();
}

float* LocalTable::Row(int64_t id) {
  auto [it, inserted] = row_of_.try_emplace(id, static_cast<int64_t>(updates_.size()));
  if (inserted) {
    data_.resize(data_.size() + stride_);
    float* row = data_.data() + it->second * stride_;
    init_.Fill(seed_, name_, id * dim_, dim_, row);
    if (optimizer_ != nullptr) optimizer_->InitSlots(row, dim_, dim_);
    updates_.push_back(0);
  }
  return data_.data() + it->second * stride_;
}

absl::Status LocalTable::Read(absl::Span<const int64_t> ids, float* out) const {
  if (absl::Status s = CheckIds(ids); !s.ok()) return s;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dst = out + i * dim_;
    auto it = row_of_.find(ids[i]);
    if (it != row_of_.end()) {
      std::memcpy(dst, data_.data() + it->second * stride_, dim_ * sizeof(float));
    } else {
      init_.Fill(seed_, name_, ids[i] * dim_, dim_, dst);
    }
  }
  return absl::OkStatus();
}

absl::Status LocalTable::Apply(absl::Span<const int64_t> ids, const float* grads) {
  if (optimizer_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(name_, " is read-only here"));
  }
  if (absl::Status s = CheckIds(ids); !s.ok()) return s;
  if (!dense_) {
    for (size_t i = 0; i < ids.size(); ++i) {
      float* row = Row(ids[i]);
      optimizer_->ApplyStrided(row, grads + i * dim_, dim_, dim_, ++updates_[row_of_[ids[i]]]);
    }
    return absl::OkStatus();
  }
  // Every held row at the table's step (every held row counts it; a row
  // made just now 0): the batch's with their gradient, the rest as Keras's
  // sparse apply takes them.
  const int64_t step =
      1 + (updates_.empty() ? 0 : *std::max_element(updates_.begin(), updates_.end()));
  for (int64_t id : ids) Row(id);
  std::vector<const float*> grad_of(updates_.size(), nullptr);
  for (size_t i = 0; i < ids.size(); ++i) grad_of[row_of_[ids[i]]] = grads + i * dim_;
  optimizer_->StepRows(data_.data(), dim_, grad_of, step);
  std::fill(updates_.begin(), updates_.end(), step);
  return absl::OkStatus();
}

absl::Status LocalTable::Set(int64_t id, const float* values) {
  if (absl::Status s = CheckIds({&id, 1}); !s.ok()) return s;
  std::memcpy(Row(id), values, dim_ * sizeof(float));
  return absl::OkStatus();
}

int LocalTable::num_slots() const { return optimizer_ ? optimizer_->num_slots() : 0; }

LocalTable::StoredRows LocalTable::Stored() const {
  StoredRows rows;
  rows.ids.resize(updates_.size());
  for (const auto& [id, row] : row_of_) rows.ids[row] = id;
  rows.data = absl::MakeConstSpan(data_);
  rows.updates = absl::MakeConstSpan(updates_);
  return rows;
}

absl::Status LocalTable::Restore(absl::Span<const int64_t> ids, absl::Span<const float> data,
                                 absl::Span<const int64_t> updates) {
  if (data.size() != ids.size() * static_cast<size_t>(stride_) || updates.size() != ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", ids.size(), " rows with ", data.size(), " floats and ",
                     updates.size(), " update counts, expected ", stride_, " floats (", dim_,
                     " values and ", num_slots(), " optimizer slots) and one count a row"));
  }
  if (absl::Status s = CheckIds(ids); !s.ok()) return s;
  absl::flat_hash_map<int64_t, int64_t> row_of;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (!row_of.try_emplace(ids[r], static_cast<int64_t>(r)).second) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": row id ", ids[r], " appears twice"));
    }
  }
  row_of_ = std::move(row_of);
  data_.assign(data.begin(), data.end());
  updates_.assign(updates.begin(), updates.end());
  return absl::OkStatus();
}

absl::StatusOr<LocalTables> LocalTables::Create(const std::vector<VariableDef>& variables,
                                                uint64_t seed, const OptimizerSpec* optimizer) {
  LocalTables out;
  for (const VariableDef& v : variables) {
    if (!v.embedding) continue;
    absl::StatusOr<std::unique_ptr<LocalTable>> table = LocalTable::Create(v, seed, optimizer);
    if (!table.ok()) return table.status();
    out.tables_.push_back(*std::move(table));
  }
  return out;
}

LocalTable* LocalTables::Find(const std::string& name) const {
  for (const auto& t : tables_) {
    if (t->name() == name) return t.get();
  }
  return nullptr;
}

absl::Status LocalTables::Read(const std::string& name, absl::Span<const int64_t> ids,
                               float* out) const {
  const LocalTable* table = Find(name);
  if (table == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("no embedding table ", name));
  return table->Read(ids, out);
}

}  // namespace pstrain::train
