// The embeddings a model starts with: one or more lookups
// (model/embedding_bag.h), each over its own table on the PS, whose outputs
// lie side by side in the first layer's input, as Keras's DenseFeatures
// concatenates a click model's embedding columns:
//   several bags    [dim_0 + dim_1 + ...], in the order of the config;
//   one sequence    [T, dim] (Keras's Embedding before a Conv1D): alone,
//                   since a sequence has no flat place beside others.
// A batch's ids, rows and row gradients are held per table in an
// EmbeddingBatch; a worker pulls each table's rows by id and pushes one
// gradient row per distinct id of each.
//
// Thread-compatible.
#ifndef PSTRAIN_MODEL_EMBEDDINGS_H_
#define PSTRAIN_MODEL_EMBEDDINGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/embedding_bag.h"

namespace pstrain::model {

// One batch's lookups, table by table (same order as the Embeddings).
struct EmbeddingBatch {
  std::vector<Bags> bags;
  std::vector<std::vector<float>> rows;       // unique_ids.size() x dim each
  std::vector<std::vector<float>> row_grads;  // same sizes, after Backward
  // Distinct ids in the batch, over every table.
  int64_t num_rows() const;
};

// Reads rows `ids` of `table` (a variable name, "<layer>/embeddings") into
// `out` (ids.size() x dim floats): from the PS, a local table or a
// checkpoint.
using TableRowFetcher = std::function<absl::Status(const std::string& table,
                                                   absl::Span<const int64_t> ids, float* out)>;

class Embeddings {
 public:
  // No embeddings: the model reads its float input as it is.
  Embeddings() = default;

  // EmbeddingBag::Create's errors for each spec, or InvalidArgument for a
  // name used twice, or a sequence embedding that is not the only one.
  static absl::StatusOr<Embeddings> Create(const std::vector<EmbeddingBagSpec>& specs,
                                           int input_dim);

  bool empty() const { return lookups_.empty(); }
  int size() const { return static_cast<int>(lookups_.size()); }
  const EmbeddingBag& operator[](int i) const { return lookups_[i]; }
  // Whether any lookup reads the input's id features.
  bool reads_ids() const;
  // Per example: [T, dim] for a sequence, [sum of dims] for bags.
  std::vector<int64_t> output_shape() const;
  int64_t output_width() const { return width_; }

  // Each table's lookups of `batch` examples (EmbeddingBag::MakeBags's
  // arguments and errors), and room for their rows.
  absl::Status MakeBags(const float* x, const int64_t* ids, int64_t ids_dim, int batch,
                        EmbeddingBatch* out) const;
  // Fills each table's rows through `fetch`; the first error wins.
  absl::Status FetchRows(const TableRowFetcher& fetch, EmbeddingBatch* batch) const;
  // out = the lookups' outputs side by side (batch x output_width()).
  void Forward(const EmbeddingBatch& batch, float* out) const;
  // From d_out (batch x output_width()), each table's row gradients into
  // batch->row_grads.
  void Backward(const float* d_out, EmbeddingBatch* batch) const;

 private:
  std::vector<EmbeddingBag> lookups_;
  std::vector<int64_t> column_;  // each lookup's first column in the output
  int64_t width_ = 0;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_EMBEDDINGS_H_
