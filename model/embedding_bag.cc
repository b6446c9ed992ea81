#include "model/embedding_bag.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/initializer_spec.h"

namespace pstrain::model {

absl::StatusOr<EmbeddingBag> EmbeddingBag::Create(const EmbeddingBagSpec& spec, int input_dim) {
  const std::string where = absl::StrCat("embedding_bag ", spec.name, ": ");
  if (spec.name.empty()) return absl::InvalidArgumentError("embedding_bag: name is missing");
  if (spec.vocabulary < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "vocabulary is ", spec.vocabulary, ": must be at least 1"));
  }
  if (spec.dim < 1 || spec.dim > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "dim is ", spec.dim, ": must be in 1..4096"));
  }
  if (spec.combiner != "sum" && spec.combiner != "mean") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "combiner \"", spec.combiner, "\" is not sum or mean"));
  }
  int buckets = 0;
  if (!absl::StartsWith(spec.ids_from, "pixel_buckets:") ||
      !absl::SimpleAtoi(spec.ids_from.substr(14), &buckets) || buckets < 1 || buckets > 256) {
    return absl::InvalidArgumentError(absl::StrCat(where, "ids_from \"", spec.ids_from,
                                                   "\" is not pixel_buckets:B with B in 1..256"));
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
  auto init = ParseInitializerSpec(spec.initializer);
  if (!init.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "initializer ", init.status().message()));
  }
  return EmbeddingBag(spec, input_dim, buckets);
}

void EmbeddingBag::MakeBags(const float* x, int batch, Bags* out) const {
  out->starts.assign(1, 0);
  out->slot.clear();
  out->unique_ids.clear();
  // Ids are dense in [0, input_dim * buckets): a table of slots beats a
  // hash map (every entry goes back to -1 before returning).
  const size_t num_ids = static_cast<size_t>(input_dim_) * buckets_;
  if (out->slot_of.size() != num_ids) out->slot_of.assign(num_ids, -1);
  int32_t* slot_of = out->slot_of.data();
  const float steps = static_cast<float>(buckets_);
  for (int b = 0; b < batch; ++b) {
    const float* row = x + static_cast<int64_t>(b) * input_dim_;
    for (int f = 0; f < input_dim_; ++f) {
      const float v = row[f];
      if (!(v > 0.0f)) continue;  // zero, negative or NaN: no feature
      // Clamped before the conversion: values above 1 (or Inf) take the top bucket.
      const int bucket = static_cast<int>(std::min(v * steps, steps - 1.0f));
      const int64_t id = int64_t{f} * buckets_ + bucket;
      int32_t& s = slot_of[id];
      if (s < 0) {
        s = static_cast<int32_t>(out->unique_ids.size());
        out->unique_ids.push_back(id);
      }
      out->slot.push_back(s);
    }
    out->starts.push_back(static_cast<int64_t>(out->slot.size()));
  }
  for (int64_t id : out->unique_ids) slot_of[id] = -1;
}

void EmbeddingBag::Forward(const Bags& bags, const float* rows, float* out) const {
  const int d = spec_.dim;
  for (int b = 0; b < bags.batch(); ++b) {
    float* __restrict o = out + static_cast<int64_t>(b) * d;
    std::fill(o, o + d, 0.0f);
    const int64_t begin = bags.starts[b], end = bags.starts[b + 1];
    for (int64_t k = begin; k < end; ++k) {
      const float* __restrict r = rows + static_cast<int64_t>(bags.slot[k]) * d;
      for (int j = 0; j < d; ++j) o[j] += r[j];
    }
    if (spec_.combiner == "mean" && end > begin) {
      const float inv = 1.0f / static_cast<float>(end - begin);
      for (int j = 0; j < d; ++j) o[j] *= inv;
    }
  }
}

void EmbeddingBag::Backward(const Bags& bags, const float* d_out, float* row_grads) const {
  const int d = spec_.dim;
  std::fill(row_grads, row_grads + bags.unique_ids.size() * d, 0.0f);
  for (int b = 0; b < bags.batch(); ++b) {
    const int64_t begin = bags.starts[b], end = bags.starts[b + 1];
    if (end == begin) continue;
    const float scale = spec_.combiner == "mean" ? 1.0f / static_cast<float>(end - begin) : 1.0f;
    const float* __restrict g = d_out + static_cast<int64_t>(b) * d;
    for (int64_t k = begin; k < end; ++k) {
      float* __restrict r = row_grads + static_cast<int64_t>(bags.slot[k]) * d;
      for (int j = 0; j < d; ++j) r[j] += scale * g[j];
    }
  }
}

}  // namespace pstrain::model
