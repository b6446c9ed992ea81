#include "model/embedding_bag.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cluster/initializer_spec.h"

namespace pstrain::model {

absl::StatusOr<EmbeddingBag> EmbeddingBag::Create(const EmbeddingBagSpec& spec, int input_dim) {
  const std::string where = absl::StrCat(spec.kind(), " ", spec.name, ": ");
  if (spec.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.kind(), ": name is missing"));
  }
  if (spec.vocabulary < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "vocabulary is ", spec.vocabulary, ": must be at least 1"));
  }
  if (spec.dim < 1 || spec.dim > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "dim is ", spec.dim, ": must be in 1..4096"));
  }
  auto init = ParseInitializerSpec(spec.initializer);
  if (!init.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "initializer ", init.status().message()));
  }
  if (spec.from_feature()) {
    if (spec.feature().empty() || spec.ids_length < 1 || spec.ids_offset < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "ids_from \"", spec.ids_from, "\" names no id feature of the input"));
    }
    return EmbeddingBag(spec, input_dim, 0);
  }
  int buckets = 0;
  if (spec.sequence || !absl::StartsWith(spec.ids_from, "pixel_buckets:") ||
      !absl::SimpleAtoi(spec.ids_from.substr(14), &buckets) || buckets < 1 || buckets > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "ids_from \"", spec.ids_from, "\" is not ",
        spec.sequence ? "feature:NAME" : "feature:NAME or pixel_buckets:B with B in 1..256"));
  }
  if (input_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "input_dim is ", input_dim, ": must be at least 1"));
  }
  const int64_t ids = int64_t{input_dim} * buckets;
  if (spec.vocabulary < ids) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "vocabulary ", spec.vocabulary, " is smaller than the ", ids,
                     " ids that ", spec.ids_from, " gives for ", input_dim, " features"));
  }
  return EmbeddingBag(spec, input_dim, buckets);
}

std::vector<int64_t> EmbeddingBag::output_shape() const {
  if (spec_.sequence) return {spec_.ids_length, spec_.dim};
  return {spec_.dim};
}

namespace {

// Vocabularies up to this many ids find their slots in a table, larger
// ones in a hash map.
constexpr int64_t kSlotTableIds = int64_t{1} << 24;

}  // namespace

absl::Status EmbeddingBag::MakeBags(const float* x, const int64_t* ids, int64_t ids_dim, int batch,
                                    Bags* out) const {
  out->starts.assign(1, 0);
  out->slot.clear();
  out->unique_ids.clear();
  // Ids are dense in [0, vocabulary): a table of slots beats a hash map
  // (every entry goes back to -1 before returning).
  const bool table = spec_.vocabulary <= kSlotTableIds;
  if (table && out->slot_of.size() != static_cast<size_t>(spec_.vocabulary)) {
    out->slot_of.assign(spec_.vocabulary, -1);
  }
  out->slot_map.clear();
  auto slot_of = [&](int64_t id) -> int32_t {
    if (table) {
      int32_t& s = out->slot_of[id];
      if (s < 0) {
        s = static_cast<int32_t>(out->unique_ids.size());
        out->unique_ids.push_back(id);
      }
      return s;
    }
    auto [it, added] = out->slot_map.try_emplace(id, static_cast<int32_t>(out->unique_ids.size()));
    if (added) out->unique_ids.push_back(id);
    return it->second;
  };
  absl::Status status;
  if (reads_ids()) {
    const int64_t n = spec_.ids_length;
    for (int b = 0; b < batch && status.ok(); ++b) {
      const int64_t* row = ids + b * ids_dim + spec_.ids_offset;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t id = row[t];
        if (id < 0 || id >= spec_.vocabulary) {
          status = absl::InvalidArgumentError(absl::StrCat(
              spec_.kind(), " ", spec_.name, ": example ", b, " has id ", id, " of feature ",
              spec_.feature(), ", outside the table's vocabulary of ", spec_.vocabulary, " rows"));
          break;
        }
        if (id == 0 && (!spec_.sequence || spec_.mask_zero)) {
          if (spec_.sequence) out->slot.push_back(-1);  // a masked position
          continue;
        }
        out->slot.push_back(slot_of(id));
      }
      out->starts.push_back(static_cast<int64_t>(out->slot.size()));
    }
  } else {
    const float steps = static_cast<float>(buckets_);
    for (int b = 0; b < batch; ++b) {
      const float* row = x + static_cast<int64_t>(b) * input_dim_;
      for (int f = 0; f < input_dim_; ++f) {
        const float v = row[f];
        if (!(v > 0.0f)) continue;  // zero, negative or NaN: no feature
        // Clamped before the conversion: values above 1 (or Inf) take the top bucket.
        const int bucket = static_cast<int>(std::min(v * steps, steps - 1.0f));
        out->slot.push_back(slot_of(int64_t{f} * buckets_ + bucket));
      }
      out->starts.push_back(static_cast<int64_t>(out->slot.size()));
    }
  }
  if (table) {
    for (int64_t id : out->unique_ids) out->slot_of[id] = -1;
  }
  return status;
}

void EmbeddingBag::Forward(const Bags& bags, const float* rows, float* out, int64_t stride) const {
  const int d = spec_.dim;
  if (spec_.sequence) {
    // Example b's places are slot[b * T .. (b + 1) * T).
    const int64_t n = spec_.ids_length;
    for (int b = 0; b < bags.batch(); ++b) {
      for (int64_t t = 0; t < n; ++t) {
        float* o = out + b * stride + t * d;
        const int32_t s = bags.slot[b * n + t];
        if (s < 0) {
          std::fill(o, o + d, 0.0f);
        } else {
          std::memcpy(o, rows + static_cast<int64_t>(s) * d, d * sizeof(float));
        }
      }
    }
    return;
  }
  for (int b = 0; b < bags.batch(); ++b) {
    float* __restrict o = out + static_cast<int64_t>(b) * stride;
    std::fill(o, o + d, 0.0f);
    const int64_t begin = bags.starts[b], end = bags.starts[b + 1];
    for (int64_t k = begin; k < end; ++k) {
      const float* __restrict r = rows + static_cast<int64_t>(bags.slot[k]) * d;
      for (int j = 0; j < d; ++j) o[j] += r[j];
    }
    if (spec_.combiner == EmbeddingBagSpec::Combiner::kMean && end > begin) {
      const float inv = 1.0f / static_cast<float>(end - begin);
      for (int j = 0; j < d; ++j) o[j] *= inv;
    }
  }
}

void EmbeddingBag::Backward(const Bags& bags, const float* d_out, int64_t stride,
                            float* row_grads) const {
  const int d = spec_.dim;
  std::fill(row_grads, row_grads + bags.unique_ids.size() * d, 0.0f);
  if (spec_.sequence) {
    const int64_t n = spec_.ids_length;
    for (int b = 0; b < bags.batch(); ++b) {
      for (int64_t t = 0; t < n; ++t) {
        const int32_t s = bags.slot[b * n + t];
        if (s < 0) continue;
        const float* __restrict g = d_out + b * stride + t * d;
        float* __restrict r = row_grads + static_cast<int64_t>(s) * d;
        for (int j = 0; j < d; ++j) r[j] += g[j];
      }
    }
    return;
  }
  for (int b = 0; b < bags.batch(); ++b) {
    const int64_t begin = bags.starts[b], end = bags.starts[b + 1];
    if (end == begin) continue;
    const float scale = spec_.combiner == EmbeddingBagSpec::Combiner::kMean
                            ? 1.0f / static_cast<float>(end - begin)
                            : 1.0f;
    const float* __restrict g = d_out + static_cast<int64_t>(b) * stride;
    for (int64_t k = begin; k < end; ++k) {
      float* __restrict r = row_grads + static_cast<int64_t>(bags.slot[k]) * d;
      for (int j = 0; j < d; ++j) r[j] += scale * g[j];
    }
  }
}

}  // namespace pstrain::model
