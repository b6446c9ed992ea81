// A multi-layer perceptron classifier on the CPU: dense layers with bias and
// optional ReLU, softmax cross-entropy over the last layer's logits.
// Matrix products go through OpenBLAS's cblas_sgemm; the rest are plain loops
// the compiler vectorises.
//
// Parameters live in one flat float array, variable after variable as
// layout() describes them ("dense_0/kernel" [in, out], "dense_0/bias" [out],
// "dense_1/kernel", ...; model/param_layout.h), so a worker can pull
// straight into it.
//
// Thread-compatible: an Mlp owns scratch buffers, so use one per thread.
#ifndef PSTRAIN_MODEL_MLP_H_
#define PSTRAIN_MODEL_MLP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"
#include "model/embedding_bag.h"
#include "model/param_layout.h"

namespace pstrain::model {

// One dense layer: out = in * kernel + bias, then ReLU when `relu`.
struct DenseLayerSpec {
  std::string name;  // its variables are "<name>/kernel" [in, units] and "<name>/bias"
  int units = 0;
  bool relu = false;
  // "glorot_uniform" (Keras's default), "zeros" or "uniform:A".
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";  // "zeros" or "uniform:A"
};

struct MlpSpec {
  int input_dim = 784;  // Fashion-MNIST: 28 x 28 pixels
  // Applied in order; the last layer's outputs are the logits of the
  // softmax cross-entropy loss (so it has no ReLU, and its units are the
  // number of classes).
  std::vector<DenseLayerSpec> layers;
  // Optional: an embedding bag between the input and the first dense layer
  // (model/embedding_bag.h), which then reads embedding_bag.dim inputs.
  EmbeddingBagSpec embedding_bag;

  // Dense layers "dense_0", "dense_1", ... with ReLU on the hidden ones.
  static MlpSpec FromWidths(int input_dim, const std::vector<int>& hidden, int num_classes);
  int num_classes() const { return layers.empty() ? 0 : layers.back().units; }
};

struct BatchResult {
  double loss_sum = 0;  // summed over the examples (divide by count)
  int64_t correct = 0;  // argmax(logits) == label
  int64_t count = 0;
};

// Scores a chunk of examples already in the dense layers' input form
// (Mlp::Evaluate, or a Backend's).
using ChunkEvaluator =
    std::function<absl::StatusOr<BatchResult>(const float* input, const int32_t* labels, int n)>;

// Scores `n` examples of `input_dim` raw features each, in chunks of at most
// `chunk`: as they are when `bag` is null, else as the bag's output, each
// chunk's rows fetched with `fetch` (from the PS, a local table or a
// checkpoint). Returns the chunks' results summed; the first error wins.
absl::StatusOr<BatchResult> EvaluateExamples(const EmbeddingBag* bag, const RowFetcher& fetch,
                                             const float* x, const int32_t* labels, int64_t n,
                                             int input_dim, int chunk,
                                             const ChunkEvaluator& evaluate);

class Mlp {
 public:
  // InvalidArgument naming the layer for no layers, a layer with < 1 units,
  // a missing or repeated name, a ReLU or fewer than 2 units on the last
  // layer, or an initializer that does not parse; or for input_dim < 1 or
  // max_batch < 1.
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(const MlpSpec& spec,
                                                     int max_batch);

  const MlpSpec& spec() const { return spec_; }
  // Where each variable lives: the dense layers' kernels and biases in the
  // flat array, then the embedding bag's table when there is one
  // (embedding: true, async: the hybrid sparse models need; its rows are
  // not in the flat array, they move by id).
  const ParamLayout& layout() const { return layout_; }
  const std::vector<VariableDef>& variables() const { return layout_.variables(); }
  const std::vector<int64_t>& offsets() const { return layout_.offsets(); }
  int64_t num_parameters() const { return layout_.num_parameters(); }
  // The embedding bag, or null when the model has none.
  const EmbeddingBag* bag() const { return bag_.has_value() ? &*bag_ : nullptr; }
  // Floats per example that ComputeGradients and Evaluate read: input_dim,
  // or the bag's dim when the model starts with an embedding bag (the
  // caller combines the rows: EmbeddingBag::Forward).
  int input_width() const { return dims_[0]; }

  // Each layer's initializers, reproducible from `seed` (one generator
  // drawn layer by layer, kernel then bias).
  std::vector<float> InitialParameters(uint64_t seed) const;

  // Forward and backward over one batch. `x` is batch x input_width() row-major,
  // `labels` in [0, num_classes). Writes the mean-loss gradient into `grads`
  // (num_parameters() floats, same layout as `params`).
  // InvalidArgument when batch is outside 1..max_batch or a label is out of
  // range; `grads` is then untouched.
  // When `on_layer_done` is set, it is called with each layer's index, last
  // layer first, as soon as that layer's kernel and bias gradients are final
  // in `grads` and this call no longer reads that layer's parameters (so the
  // caller may push them and overwrite the parameters while the layers
  // below are still being differentiated).
  // When `input_grad` is not null, the mean-loss gradient with respect to
  // `x` goes there (batch x input_width()), before layer 0 is reported done:
  // what an embedding bag's backward pass starts from.
  absl::StatusOr<BatchResult> ComputeGradients(
      const float* params, const float* x, const int32_t* labels, int batch, float* grads,
      const std::function<void(int layer)>& on_layer_done = nullptr,
      float* input_grad = nullptr);

  // InvalidArgument naming the first label outside [0, num_classes).
  absl::Status CheckLabels(const int32_t* labels, int64_t n) const;

  // Forward only over `n` examples of input_width() floats (any n >= 0,
  // processed in chunks of max_batch). Same errors as ComputeGradients for
  // labels.
  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x,
                                       const int32_t* labels, int64_t n);

 private:
  Mlp(const MlpSpec& spec, int max_batch, std::optional<EmbeddingBag> bag);
  // Runs the forward pass for `batch` rows; fills activations_ and probs_ and
  // accumulates loss/accuracy into `result`.
  void Forward(const float* params, const float* x, const int32_t* labels,
               int batch, BatchResult* result);

  const MlpSpec spec_;
  const int max_batch_;
  std::optional<EmbeddingBag> bag_;
  std::vector<int> dims_;  // input, hidden..., classes
  ParamLayout layout_;
  // Per dense layer, from layout_: its kernel's and its bias's offsets.
  std::vector<int64_t> kernel_at_, bias_at_;
  // Scratch, sized for max_batch_: activations_[0] is unused (the input);
  // activations_[i] is layer i's output (after its ReLU if it has one,
  // softmax probabilities for the last).
  std::vector<std::vector<float>> activations_;
  std::vector<std::vector<float>> deltas_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_MLP_H_
