// A classifier computed on the CPU: the executor of a model's description
// (model/model_graph.h: a stack of layers, or a graph of them when layers
// name their inputs; add and concatenate join branches, and a layer's
// output may feed several layers, its gradient the sum of theirs), holding
// each layer's computation (model/layers.h) and the activations and
// gradients of a batch; the loss (softmax or sigmoid cross-entropy) over
// the last layer's logits.
//
// Parameters live in one flat float array, variable after variable as
// layout() describes them ("dense_0/kernel" [in, out], "dense_0/bias" [out],
// "dense_1/kernel", ...; model/param_layout.h), so a worker can pull
// straight into it.
//
// Thread-compatible: a Network owns scratch buffers, so use one per thread.
#ifndef PSTRAIN_MODEL_NETWORK_H_
#define PSTRAIN_MODEL_NETWORK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/placement.h"
#include "data/dataset.h"
#include "model/embeddings.h"
#include "model/layers.h"
#include "model/model_graph.h"
#include "model/network_spec.h"
#include "model/param_layout.h"

namespace pstrain::model {

struct BatchResult {
  double loss_sum = 0;  // summed over the examples (divide by count)
  int64_t correct = 0;  // argmax(logits) == label (sigmoid: logit > 0 == label)
  int64_t count = 0;
  // Binary labels (sigmoid loss): the positive probability of the positive
  // and of the negative examples, counted in kAucBins equal bins of [0, 1],
  // for the area under the ROC curve; empty otherwise. A step's own scores
  // wait in `scored` (bin * 2 + label each), so that a step costs its batch
  // and not two histograms; Add() folds them into the histograms.
  static constexpr int kAucBins = 10000;
  std::vector<int64_t> positives, negatives;
  std::vector<int32_t> scored;

  // Counts one example's positive probability `p` and label (0 or 1).
  void AddScore(float p, int label) {
    const int bin = p >= 1.0f ? kAucBins - 1 : p > 0.0f ? static_cast<int>(p * kAucBins) : 0;
    scored.push_back(bin * 2 + (label == 1 ? 1 : 0));
  }
  // Adds another result's counts (and histograms).
  void Add(const BatchResult& other);
  double mean_loss() const { return loss_sum / static_cast<double>(count); }
  double accuracy() const { return static_cast<double>(correct) / static_cast<double>(count); }
  bool has_auc() const { return !positives.empty() || !scored.empty(); }
  // The ROC curve's area from the histograms: the chance that a positive
  // scores above a negative, ties (one bin) counted half. 0.5 without both
  // kinds of example.
  double Auc() const;
  // The score as summaries name it: loss (the mean), accuracy, and auc with
  // binary labels; in that order.
  std::vector<std::pair<std::string, double>> ScoreScalars() const;
};

// Scores a chunk of examples already in the dense layers' input form
// (Network::Evaluate, or a Backend's).
using ChunkEvaluator =
    std::function<absl::StatusOr<BatchResult>(const float* input, const int32_t* labels, int n)>;

// Scores every example of `examples` (dense features of `examples.example_dim`
// floats, or the bytes they are held as: data::CopyFeatures, and
// `examples.ids_dim` ids each) in chunks of at most `chunk`: as they are when
// `embeddings` is empty, else as the embeddings' output, each chunk's rows
// fetched with `fetch` (from the PS, a local table or a checkpoint). Returns
// the chunks' results summed; the first error wins. REQUIRES: chunk >= 1.
absl::StatusOr<BatchResult> EvaluateExamples(const Embeddings& embeddings,
                                             const TableRowFetcher& fetch,
                                             const data::Dataset& examples, int chunk,
                                             const ChunkEvaluator& evaluate);

// The dropout seed of one training step: from the job's seed, the replica
// and its step, so a run repeats and replicas draw different masks.
uint64_t StepSeed(uint64_t job_seed, int replica, int64_t step);

class Network {
 public:
  // ModelGraph::Create's errors, or InvalidArgument for max_batch < 1.
  static absl::StatusOr<std::unique_ptr<Network>> Create(const NetworkSpec& spec, int max_batch);

  // The model's description (model/model_graph.h), and its parts.
  const ModelGraph& graph() const { return graph_; }
  const NetworkSpec& spec() const { return graph_.spec(); }
  const ParamLayout& layout() const { return graph_.layout(); }
  const std::vector<VariableDef>& variables() const { return graph_.variables(); }
  const std::vector<int64_t>& offsets() const { return graph_.offsets(); }
  int64_t num_parameters() const { return graph_.num_parameters(); }
  const Embeddings& embeddings() const { return graph_.embeddings(); }
  // Floats per example that ComputeGradients and Evaluate read: input_dim,
  // or the embeddings' output (the caller gathers the rows:
  // Embeddings::Forward).
  int input_width() const { return graph_.input_width(); }
  const std::vector<Shape>& shapes() const { return graph_.shapes(); }
  const std::vector<int>& layer_inputs(int l) const { return graph_.layer_inputs(l); }
  const Shape& input_shape(int l) const { return graph_.input_shape(l); }
  bool sequential() const { return graph_.sequential(); }
  // The sgemm calls of one training step of `batch` examples.
  std::vector<GemmShape> StepGemms(int batch) const;
  // How many layers oneDNN computes (model/layers.h's CpuKernels).
  int onednn_layers() const;
  // How many zero_padding2d layers are folded into the convolution that
  // reads them (LayerKindDef::folds_padding): never computed, their zeros
  // the convolution's padding.
  int folded_paddings() const { return folded_paddings_; }

  // ModelGraph::InitialParameters.
  std::vector<float> InitialParameters(uint64_t seed) const {
    return graph_.InitialParameters(seed);
  }

  // Dropout masks of the following ComputeGradients calls derive from this
  // seed (the trainer's, per replica and step), so runs repeat.
  void SetStepSeed(uint64_t seed);

  // Forward and backward over one batch. `x` is batch x input_width() row-major,
  // `labels` in [0, num_classes). Writes the mean-loss gradient into `grads`
  // (num_parameters() floats, same layout as `params`).
  // InvalidArgument when batch is outside 1..max_batch or a label is out of
  // range; `grads` is then untouched.
  // When `on_layer_done` is set, it is called with the layout's number of
  // each layer with variables, last first, as soon as that layer's kernel
  // and bias gradients are final in `grads` and this call no longer reads
  // its parameters (so the caller may push them and overwrite the
  // parameters while the layers below are still being differentiated).
  // When `input_grad` is not null, the mean-loss gradient with respect to
  // `x` goes there (batch x input_width()), before the first layer is
  // reported done: what the embeddings' backward pass starts from.
  absl::StatusOr<BatchResult> ComputeGradients(
      const float* params, const float* x, const int32_t* labels, int batch, float* grads,
      const std::function<void(int layer)>& on_layer_done = nullptr, float* input_grad = nullptr);

  // InvalidArgument naming the first label outside [0, num_classes).
  absl::Status CheckLabels(const int32_t* labels, int64_t n) const {
    return graph_.CheckLabels(labels, n);
  }

  // Forward only (dropout off) over `n` examples of input_width() floats
  // (any n >= 0, in chunks that keep the scratch under 32 MiB). Same errors
  // as ComputeGradients for labels. With `outputs`, each example's outputs
  // (softmax probabilities, or the sigmoid's one) are appended to it.
  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x, const int32_t* labels,
                                       int64_t n, std::vector<float>* outputs = nullptr);

 private:
  Network(ModelGraph graph, int max_batch);
  // Grows the activations (and, with `gradients`, the deltas) to `batch`
  // rows.
  void EnsureScratch(int batch, bool gradients);
  // Runs the forward pass for `batch` rows; fills activations_ (softmax
  // probabilities for the last) and adds loss and accuracy to `result`.
  void Forward(const float* params, const float* x, const int32_t* labels, int batch, bool training,
               BatchResult* result);

  const ModelGraph graph_;
  const int max_batch_;
  std::vector<std::unique_ptr<Layer>> layers_;
  // Per position, the position whose memory holds it: the graph's
  // storage, and for a folded pad's output its input's.
  std::vector<int> storage_;
  int folded_paddings_ = 0;
  int eval_chunk_ = 1;            // examples per forward pass in Evaluate
  // Scratch: activations_[i] is layer i-1's output (i >= 1; after its ReLU
  // if it has one, softmax probabilities for the last); deltas_[i] the loss
  // gradient there.
  std::vector<std::vector<float>> activations_;
  std::vector<std::vector<float>> deltas_;
  // Per position, the memory in use: a flatten's output is its input's.
  std::vector<const float*> act_;
  std::vector<float*> delta_;
  // Backward: whether a position's gradient has been written this pass
  // (by storage); a layer whose input's has is given scratch_ instead and
  // the scratch is added to it (a tensor read by several layers).
  std::vector<char> written_;
  // Backward: whether a position's gradient reaches a variable (or the
  // input's gradient, when asked for).
  std::vector<char> needs_grad_;
  std::vector<std::vector<float>> scratch_;
  std::vector<const float*> ins_;
  std::vector<float*> d_ins_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_NETWORK_H_
