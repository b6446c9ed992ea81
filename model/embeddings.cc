#include "model/embeddings.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::model {

int64_t EmbeddingBatch::num_rows() const {
  int64_t n = 0;
  for (const Bags& b : bags) n += static_cast<int64_t>(b.unique_ids.size());
  return n;
}

absl::StatusOr<Embeddings> Embeddings::Create(const std::vector<EmbeddingBagSpec>& specs,
                                              int input_dim) {
  Embeddings out;
  std::set<std::string> names;
  for (const EmbeddingBagSpec& spec : specs) {
    absl::StatusOr<EmbeddingBag> lookup = EmbeddingBag::Create(spec, input_dim);
    if (!lookup.ok()) return lookup.status();
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.kind(), " ", spec.name, ": the name is used twice"));
    }
    if (spec.sequence && specs.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding ", spec.name,
          ": a sequence embedding ([T, dim]) must be the model's only embedding; several are "
          "concatenated flat, so make each an embedding_bag"));
    }
    out.column_.push_back(out.width_);
    out.width_ += lookup->output_width();
    out.lookups_.push_back(*std::move(lookup));
  }
  return out;
}

bool Embeddings::reads_ids() const {
  for (const EmbeddingBag& l : lookups_) {
    if (l.reads_ids()) return true;
  }
  return false;
}

std::vector<int64_t> Embeddings::output_shape() const {
  if (lookups_.size() == 1) return lookups_[0].output_shape();
  return {width_};
}

absl::Status Embeddings::MakeBags(const float* x, const int64_t* ids, int64_t ids_dim, int batch,
                                  EmbeddingBatch* out) const {
  out->bags.resize(lookups_.size());
  out->rows.resize(lookups_.size());
  out->row_grads.resize(lookups_.size());
  for (size_t i = 0; i < lookups_.size(); ++i) {
    if (absl::Status s = lookups_[i].MakeBags(x, ids, ids_dim, batch, &out->bags[i]); !s.ok()) {
      return s;
    }
    out->rows[i].resize(out->bags[i].unique_ids.size() * lookups_[i].dim());
  }
  return absl::OkStatus();
}

absl::Status Embeddings::FetchRows(const TableRowFetcher& fetch, EmbeddingBatch* batch) const {
  for (size_t i = 0; i < lookups_.size(); ++i) {
    if (absl::Status s =
            fetch(lookups_[i].spec().table(), batch->bags[i].unique_ids, batch->rows[i].data());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void Embeddings::Forward(const EmbeddingBatch& batch, float* out) const {
  for (size_t i = 0; i < lookups_.size(); ++i) {
    lookups_[i].Forward(batch.bags[i], batch.rows[i].data(), out + column_[i], width_);
  }
}

void Embeddings::Backward(const float* d_out, EmbeddingBatch* batch) const {
  for (size_t i = 0; i < lookups_.size(); ++i) {
    batch->row_grads[i].resize(batch->rows[i].size());
    lookups_[i].Backward(batch->bags[i], d_out + column_[i], width_, batch->row_grads[i].data());
  }
}

}  // namespace pstrain::model
