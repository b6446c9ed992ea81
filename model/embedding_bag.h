// An embedding-bag layer for sparse id features: each example is a bag of
// ids; the layer looks up one row of an embedding table [vocabulary, dim]
// per id and combines the bag's rows by sum or mean into one dim-wide
// vector, which feeds the dense layers. The table lives on the PS (rows
// created on first touch, spread by id hash, updated per row: lazy Adam and
// Adagrad), so a batch moves only the rows its ids name: a worker pulls
// them, the layer combines them, and backprop gives one gradient row per
// distinct id, which the worker pushes.
//
// Where the ids come from (`ids_from`):
//   "pixel_buckets:B"  image features in [0, 1] (Fashion-MNIST), one id per
//                      non-zero feature: feature * B + bucket, the bucket
//                      being its intensity cut into B equal steps. A
//                      bag-of-(pixel, intensity) model: the sparse view of
//                      an image a one-hot feature pipeline would give.
//
// Thread-compatible.
#ifndef PSTRAIN_MODEL_EMBEDDING_BAG_H_
#define PSTRAIN_MODEL_EMBEDDING_BAG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain::model {

struct EmbeddingBagSpec {
  // The table variable is "<name>/embeddings".
  std::string name = "embedding";
  int64_t vocabulary = 0;  // 0: the model has no embedding bag
  int dim = 0;
  std::string combiner = "mean";             // "sum" or "mean"
  std::string ids_from;                      // "pixel_buckets:B"
  std::string initializer = "uniform:0.05";  // as the PS's (optim/initializer.h)

  bool enabled() const { return vocabulary > 0; }
  std::string table() const { return name + "/embeddings"; }
};

// One batch's bags: example b holds ids slot[starts[b] .. starts[b + 1]),
// each an index into `unique_ids`, the batch's distinct ids in the order
// they first appear.
struct Bags {
  std::vector<int64_t> starts;  // batch + 1
  std::vector<int32_t> slot;    // one per id occurrence
  std::vector<int64_t> unique_ids;
  int batch() const { return starts.empty() ? 0 : static_cast<int>(starts.size()) - 1; }

  // MakeBags's scratch, kept so that a reused Bags allocates nothing: the
  // slot of every possible id, -1 for ids not in the batch.
  std::vector<int32_t> slot_of;
};

class EmbeddingBag {
 public:
  // InvalidArgument naming the field: no name, vocabulary or dim < 1, dim
  // over 4096, a combiner other than sum or mean, ids_from not
  // "pixel_buckets:B" with B in 1..256, a vocabulary smaller than the ids
  // the features give (input_dim * B), or an initializer that does not
  // parse.
  static absl::StatusOr<EmbeddingBag> Create(const EmbeddingBagSpec& spec, int input_dim);

  const EmbeddingBagSpec& spec() const { return spec_; }
  int dim() const { return spec_.dim; }

  // The bags of `batch` examples of input_dim features each (row-major).
  void MakeBags(const float* x, int batch, Bags* out) const;

  // out[b] = the sum (or mean) of the rows of example b's ids; `rows` holds
  // unique_ids.size() rows of dim floats. An empty bag gives zeros.
  void Forward(const Bags& bags, const float* rows, float* out) const;

  // From d_out (batch x dim, the loss gradient at the layer's output), the
  // gradient of each distinct id's row into `row_grads` (unique_ids.size()
  // x dim): the sum over the bags holding it (divided by the bag's size
  // under mean), once per occurrence.
  void Backward(const Bags& bags, const float* d_out, float* row_grads) const;

 private:
  EmbeddingBag(const EmbeddingBagSpec& spec, int input_dim, int buckets)
      : spec_(spec), input_dim_(input_dim), buckets_(buckets) {}

  EmbeddingBagSpec spec_;
  int input_dim_ = 0;
  int buckets_ = 0;
};

// Reads rows `ids` of the table into `out` (ids.size() x dim floats): from
// the PS, a local table or a checkpoint.
using RowFetcher = std::function<absl::Status(absl::Span<const int64_t> ids, float* out)>;
}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_EMBEDDING_BAG_H_
