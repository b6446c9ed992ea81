#include "ps_server/shard_store.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain::ps {
namespace {

absl::Status CheckFinite(absl::string_view key, const float* data, size_t n,
                         absl::string_view what) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " for ", key, " has a non-finite value (", data[i],
          ") at element ", i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> ShardStore::Initialize(
    const std::vector<SliceDef>& slices,
    const std::vector<absl::string_view>& values,
    const OptimizerSpec& optimizer) {
  absl::MutexLock lock(&init_mu_);
  if (initialized_.load()) return false;
  if (slices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables has ", slices.size(), " slices but ", values.size(),
        " initial values"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                           CreateOptimizer(optimizer));
  std::map<std::string, std::unique_ptr<Slice>, std::less<>> built;
  for (size_t i = 0; i < slices.size(); ++i) {
    const SliceDef& def = slices[i];
    std::string key = def.key();
    if (def.ps != ps_index_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice ", key, " is placed on ps:", def.ps, ", not on this ps:",
          ps_index_));
    }
    if (def.row_begin < 0 || def.row_end <= def.row_begin ||
        def.row_elements < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice ", key, " has rows [", def.row_begin, ", ", def.row_end,
          ") of ", def.row_elements, " elements"));
    }
    if (static_cast<int64_t>(values[i].size()) != def.bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial value for ", key, " has ", values[i].size(),
          " bytes, expected ", def.bytes()));
    }
    auto slice = std::make_unique<Slice>();
    slice->def = def;
    {
      absl::MutexLock slice_lock(&slice->mu);
      const int64_t n = def.elements();
      slice->data.resize(n * (1 + opt->num_slots()));
      std::memcpy(slice->data.data(), values[i].data(), values[i].size());
      PSTRAIN_RETURN_IF_ERROR(CheckFinite(key, slice->data.data(), n, "initial value"));
      for (int k = 0; k < opt->num_slots(); ++k) {
        std::fill(slice->data.begin() + (k + 1) * n, slice->data.begin() + (k + 2) * n,
                  opt->initial_slot_value(k));
      }
    }
    if (!built.emplace(key, std::move(slice)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice ", key, " appears twice in CreateVariables"));
    }
  }
  slices_ = std::move(built);
  optimizer_ = std::move(opt);
  initialized_.store(true, std::memory_order_release);
  return true;
}

ShardStore::Slice* ShardStore::Find(absl::string_view key,
                                    absl::Status* status) const {
  if (!initialized()) {
    *status = absl::FailedPreconditionError(absl::StrCat(
        "ps:", ps_index_, " has no variables yet: the chief has not initialised them"));
    return nullptr;
  }
  auto it = slices_.find(key);
  if (it == slices_.end()) {
    *status = absl::NotFoundError(
        absl::StrCat("ps:", ps_index_, " holds no slice \"", key, "\""));
    return nullptr;
  }
  return it->second.get();
}

absl::Status ShardStore::Pull(absl::string_view key, std::string* out) const {
  absl::Status status;
  const Slice* slice = Find(key, &status);
  if (slice == nullptr) return status;
  {
    absl::MutexLock lock(&slice->mu);
    out->assign(reinterpret_cast<const char*>(slice->data.data()),
                slice->def.bytes());
  }
  slice->pulls.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ShardStore::ValidateUpdate(const Slice& slice, const Update& u) {
  if (static_cast<int64_t>(u.gradient.size()) != slice.def.bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient for ", u.key, " has ", u.gradient.size(),
        " bytes, expected ", slice.def.bytes()));
  }
  // The bytes may not be 4-aligned, so read each element with memcpy.
  const char* p = u.gradient.data();
  for (size_t i = 0; i < u.gradient.size() / 4; ++i) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    if (!std::isfinite(f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient for ", u.key, " has a non-finite value (", f,
          ") at element ", i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ShardStore::Push(absl::Span<const Update> updates) {
  std::vector<Slice*> targets(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    absl::Status status;
    targets[i] = Find(updates[i].key, &status);
    if (targets[i] == nullptr) return status;
    for (size_t j = 0; j < i; ++j) {
      if (targets[j] == targets[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push names slice ", updates[i].key, " twice"));
      }
    }
    PSTRAIN_RETURN_IF_ERROR(ValidateUpdate(*targets[i], updates[i]));
  }
  std::vector<float> aligned;
  for (size_t i = 0; i < updates.size(); ++i) {
    const size_t n = updates[i].gradient.size() / sizeof(float);
    const float* grad = reinterpret_cast<const float*>(updates[i].gradient.data());
    // protobuf's string storage is malloc-aligned in practice; copy only if
    // it ever is not.
    if (reinterpret_cast<uintptr_t>(grad) % alignof(float) != 0) {
      aligned.resize(n);
      std::memcpy(aligned.data(), updates[i].gradient.data(),
                  updates[i].gradient.size());
      grad = aligned.data();
    }
    Slice* slice = targets[i];
    {
      absl::MutexLock lock(&slice->mu);
      absl::Span<float> slots[Optimizer::kMaxSlots];
      for (int k = 0; k < optimizer_->num_slots(); ++k) {
        slots[k] = absl::MakeSpan(slice->data.data() + (k + 1) * n, n);
      }
      optimizer_->Apply(absl::MakeSpan(slice->data.data(), n),
                        absl::MakeConstSpan(grad, n),
                        absl::MakeConstSpan(slots, optimizer_->num_slots()),
                        ++slice->updates);
    }
    slice->pushes.fetch_add(1, std::memory_order_relaxed);
  }
  return step_.fetch_add(1) + 1;
}

std::vector<SliceStatsSnapshot> ShardStore::Stats() const {
  std::vector<SliceStatsSnapshot> out;
  if (!initialized()) return out;
  for (const auto& [key, slice] : slices_) {
    out.push_back({key, slice->def.bytes(), slice->pushes.load(),
                   slice->pulls.load()});
  }
  return out;
}

}  // namespace pstrain::ps
