#include "store/stored_tensor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::ps {

struct StoredTensor::Pin {
  // Holds of answers not yet released.
  std::atomic<int> holds{0};
  // The values' buffer once the tensor has moved on (BeforeWriteLocked);
  // freed with the last hold.
  std::vector<float> orphan;
};

HeldBytes HoldValuesLocked(StoredTensor& t) { return HoldDataLocked(t, t.bytes); }

HeldBytes HoldDataLocked(StoredTensor& t, int64_t size) {
  if (t.pin == nullptr) t.pin = std::make_shared<StoredTensor::Pin>();
  t.pin->holds.fetch_add(1, std::memory_order_relaxed);
  HeldBytes held;
  held.data = reinterpret_cast<const char*>(t.data.data());
  held.size = size;
  // Release: the sender's reads of the values happen before a writer that
  // sees the count drop (BeforeWriteLocked's acquire).
  held.hold = std::shared_ptr<const void>(held.data, [pin = t.pin](const void*) {
    pin->holds.fetch_sub(1, std::memory_order_release);
  });
  return held;
}

void BeforeWriteLocked(StoredTensor& t) {
  if (t.pin == nullptr || t.pin->holds.load(std::memory_order_acquire) == 0) return;
  // Moving the vector keeps its buffer where the holds point.
  t.pin->orphan = std::move(t.data);
  t.data = t.pin->orphan;
  t.pin.reset();
}

absl::StatusOr<int64_t> TransferBytes(const StoredTensor& t, absl::Span<const int64_t> ids,
                                      int ps_index, int num_ps) {
  if (!t.embedding) {
    if (!ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.key, " is dense but the request names ", ids.size(), " ids"));
    }
    return t.bytes;
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= t.vocabulary) {
      return absl::InvalidArgumentError(
          absl::StrCat("id ", id, " is out of range [0, ", t.vocabulary, ") for table ", t.key));
    }
    if (num_ps == 1) continue;  // every id is this PS's
    const int owner = EmbeddingOwner(id, num_ps);
    if (owner != ps_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " of table ", t.key, " belongs to ps:", owner, ", not ps:", ps_index));
    }
  }
  return static_cast<int64_t>(ids.size()) * t.dim * 4;
}

float* RowLocked(StoredTensor& t, int64_t id, const optim::Optimizer& opt, int64_t* index) {
  const int64_t stride = t.dim * (1 + t.slots);
  auto [it, inserted] = t.row_of.try_emplace(id, static_cast<int64_t>(t.row_updates.size()));
  if (inserted) {
    t.data.resize(t.data.size() + stride);
    float* row = t.data.data() + it->second * stride;
    t.init.Fill(t.seed, t.variable, id * t.dim, t.dim, row);
    opt.InitSlots(row, t.dim, t.dim);
    t.row_updates.push_back(0);
    t.rows.store(static_cast<int64_t>(t.row_updates.size()), std::memory_order_relaxed);
  }
  if (index != nullptr) *index = it->second;
  return t.data.data() + it->second * stride;
}

void ReadRowLocked(const StoredTensor& t, int64_t id, char* out) {
  auto it = t.row_of.find(id);
  if (it != t.row_of.end()) {
    const int64_t stride = t.dim * (1 + t.slots);
    std::memcpy(out, t.data.data() + it->second * stride, t.dim * 4);
    return;
  }
  float row[256];
  for (int64_t done = 0; done < t.dim; done += 256) {
    const int64_t n = std::min<int64_t>(256, t.dim - done);
    t.init.Fill(t.seed, t.variable, id * t.dim + done, n, row);
    std::memcpy(out + done * 4, row, n * 4);
  }
}

absl::Status CheckRowLimitLocked(const StoredTensor& t, absl::Span<const int64_t> ids,
                                 int64_t max_rows, int ps_index) {
  // Every pending and named row counted as new bounds the growth: within
  // the limit, nothing needs counting exactly.
  if (static_cast<int64_t>(t.row_of.size() + t.sparse_accum.size() + ids.size()) <= max_rows) {
    return absl::OkStatus();
  }
  int64_t rows = static_cast<int64_t>(t.row_of.size());
  for (const auto& [id, acc] : t.sparse_accum) rows += !t.row_of.contains(id);
  for (int64_t id : ids) {
    rows += !t.row_of.contains(id) && !t.sparse_accum.contains(id);
  }
  if (rows <= max_rows) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("table ", t.key, " would grow to ", rows,
                                                   " rows on ps:", ps_index, "; the limit is ",
                                                   max_rows, " (--max_table_rows)"));
}

}  // namespace pstrain::ps
