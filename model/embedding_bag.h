// Embedding lookups for sparse id features, the two ways Keras and
// TensorFlow offer them:
//   embedding_bag  each example is a bag of ids; one row of the table
//                  [vocabulary, dim] per id, combined by sum or mean into
//                  one dim-wide vector ([dim]);
//   embedding      each example is a sequence of T ids; each id's row kept
//                  in place ([T, dim]), what Keras's Embedding layer gives
//                  a Conv1D.
// The table lives on the PS (rows created on first touch, spread by id hash,
// updated per row: lazy Adam and Adagrad), so a batch moves only the rows its
// ids name: a worker pulls them, the layer gathers them, and backprop gives
// one gradient row per distinct id, which the worker pushes.
//
// Where the ids come from (`ids_from`):
//   "feature:NAME"     an int64 or string feature of the input (its ids in
//                      the id layout of data/feature_spec.h); id 0 is
//                      padding in a bag (dropped), and in a sequence when
//                      mask_zero is set (a zero row, no gradient);
//   "pixel_buckets:B"  (bags only) image features in [0, 1], one id per
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

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain::model {

struct EmbeddingBagSpec {
  // The table variable is "<name>/embeddings".
  std::string name = "embedding";
  int64_t vocabulary = 0;  // 0: the model has no embedding
  int dim = 0;
  enum class Combiner { kMean, kSum };
  Combiner combiner = Combiner::kMean;       // bags: how a bag's rows add up
  std::string ids_from;                      // "pixel_buckets:B" or "feature:NAME"
  std::string initializer = "uniform:0.05";  // as the PS's (optim/initializer.h)
  // The embedding layer: each id's row kept in place ([ids_length, dim]).
  bool sequence = false;
  // Sequences: id 0 is padding (Keras's mask_zero), a zero row and no
  // gradient. Else id 0 is a row like any other, as in Keras by default.
  bool mask_zero = false;
  // "feature:NAME": where the feature's ids lie in each example's id layout
  // and how many it has (set from the input's feature spec).
  int64_t ids_offset = 0;
  int64_t ids_length = 0;

  bool enabled() const { return vocabulary > 0; }
  bool from_feature() const { return ids_from.rfind("feature:", 0) == 0; }
  std::string feature() const { return from_feature() ? ids_from.substr(8) : ""; }
  std::string table() const { return name + "/embeddings"; }
  // "embedding" or "embedding_bag", as configs name the layer.
  const char* kind() const { return sequence ? "embedding" : "embedding_bag"; }
};

// One batch's ids: example b holds slot[starts[b] .. starts[b + 1]), each an
// index into `unique_ids`, the batch's distinct ids in the order they first
// appear (-1 in a sequence: a masked position).
struct Bags {
  std::vector<int64_t> starts;  // batch + 1
  std::vector<int32_t> slot;    // one per id occurrence (sequence: per position)
  std::vector<int64_t> unique_ids;
  int batch() const { return starts.empty() ? 0 : static_cast<int>(starts.size()) - 1; }

  // MakeBags's scratch, kept so that a reused Bags allocates nothing: the
  // slot of every possible id, -1 for ids not in the batch (vocabularies up
  // to 2^24), or a map for larger ones.
  std::vector<int32_t> slot_of;
  absl::flat_hash_map<int64_t, int32_t> slot_map;
};

class EmbeddingBag {
 public:
  // InvalidArgument naming the field: no name, vocabulary or dim < 1, dim
  // over 4096, ids_from neither
  // "feature:NAME" (with ids_length >= 1) nor, for a bag,
  // "pixel_buckets:B" with B in 1..256, a vocabulary smaller than the ids
  // the pixel features give (input_dim * B), or an initializer that does
  // not parse.
  static absl::StatusOr<EmbeddingBag> Create(const EmbeddingBagSpec& spec, int input_dim);

  const EmbeddingBagSpec& spec() const { return spec_; }
  int dim() const { return spec_.dim; }
  // Whether the ids come from the input's id features (MakeBags reads
  // `ids`) rather than its floats.
  bool reads_ids() const { return spec_.from_feature(); }
  // Per example: [dim] for a bag, [ids_length, dim] for a sequence.
  std::vector<int64_t> output_shape() const;
  int64_t output_width() const { return spec_.sequence ? spec_.ids_length * spec_.dim : spec_.dim; }

  // The ids of `batch` examples: from `x` (input_dim floats each, for
  // pixel_buckets) or `ids` (ids_dim per example, for feature:NAME).
  // InvalidArgument naming the example and feature for an id outside
  // [0, vocabulary).
  absl::Status MakeBags(const float* x, const int64_t* ids, int64_t ids_dim, int batch,
                        Bags* out) const;

  // out[b] = the sum (or mean) of the rows of example b's ids, or the rows
  // in place for a sequence; `rows` holds unique_ids.size() rows of dim
  // floats. An empty bag, or a masked position, gives zeros. Example b's
  // output starts at out + b * stride (stride >= output_width(): other
  // lookups' outputs may lie between).
  void Forward(const Bags& bags, const float* rows, float* out, int64_t stride) const;
  void Forward(const Bags& bags, const float* rows, float* out) const {
    Forward(bags, rows, out, output_width());
  }

  // From d_out (batch x output_width(), the loss gradient at the layer's
  // output), the gradient of each distinct id's row into `row_grads`
  // (unique_ids.size() x dim): the sum over the places holding it (divided
  // by the bag's size under mean). Example b's gradient starts at
  // d_out + b * stride.
  void Backward(const Bags& bags, const float* d_out, int64_t stride, float* row_grads) const;
  void Backward(const Bags& bags, const float* d_out, float* row_grads) const {
    Backward(bags, d_out, output_width(), row_grads);
  }

 private:
  EmbeddingBag(const EmbeddingBagSpec& spec, int input_dim, int buckets)
      : spec_(spec), input_dim_(input_dim), buckets_(buckets) {}

  EmbeddingBagSpec spec_;
  int input_dim_ = 0;
  int buckets_ = 0;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_EMBEDDING_BAG_H_
