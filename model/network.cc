#include "model/network.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster/initial_stream.h"
#include "cluster/initializer_spec.h"
#include "model/compute_threads.h"
#include "model/cuda_layer_math.h"
#include "model/layer_kind.h"

namespace pstrain::model {

NetworkSpec NetworkSpec::FromWidths(int input_dim, const std::vector<int>& hidden,
                                    int num_classes) {
  NetworkSpec spec;
  spec.input_dim = input_dim;
  for (size_t i = 0; i <= hidden.size(); ++i) {
    LayerSpec layer;
    layer.name = absl::StrCat("dense_", i);
    layer.units = i < hidden.size() ? hidden[i] : num_classes;
    layer.relu = i < hidden.size();
    spec.layers.push_back(layer);
  }
  return spec;
}

const char* LossName(Loss loss) {
  return loss == Loss::kSigmoidCrossEntropy ? "sigmoid cross-entropy" : "softmax cross-entropy";
}

void BatchResult::Add(const BatchResult& other) {
  loss_sum += other.loss_sum;
  correct += other.correct;
  count += other.count;
  if (!other.has_auc()) return;
  if (positives.empty()) {
    positives.assign(kAucBins, 0);
    negatives.assign(kAucBins, 0);
  }
  for (int32_t s : scored) ++(s & 1 ? positives : negatives)[s >> 1];
  scored.clear();
  if (!other.positives.empty()) {
    for (int b = 0; b < kAucBins; ++b) {
      positives[b] += other.positives[b];
      negatives[b] += other.negatives[b];
    }
  }
  for (int32_t s : other.scored) ++(s & 1 ? positives : negatives)[s >> 1];
}

double BatchResult::Auc() const {
  if (!scored.empty()) {  // fold the scores not yet in the histograms
    BatchResult folded;
    folded.Add(*this);
    return folded.Auc();
  }
  double pos = 0, neg = 0;
  for (int b = 0; b < static_cast<int>(positives.size()); ++b) {
    pos += positives[b];
    neg += negatives[b];
  }
  if (pos == 0 || neg == 0) return 0.5;
  // Over the bins from the lowest score: each positive beats the negatives
  // below its bin and ties half of those in it.
  double below = 0, wins = 0;
  for (int b = 0; b < static_cast<int>(positives.size()); ++b) {
    wins += positives[b] * (below + 0.5 * negatives[b]);
    below += negatives[b];
  }
  return wins / (pos * neg);
}

std::vector<std::pair<std::string, double>> BatchResult::ScoreScalars() const {
  std::vector<std::pair<std::string, double>> out = {{"loss", mean_loss()},
                                                     {"accuracy", accuracy()}};
  if (has_auc()) out.push_back({"auc", Auc()});
  return out;
}

uint64_t StepSeed(uint64_t job_seed, int replica, int64_t step) {
  return (job_seed * 1000003 + static_cast<uint64_t>(replica)) * 0x100000001B3ull +
         static_cast<uint64_t>(step);
}

namespace {

// Scratch floats per forward pass Evaluate allows itself (32 MiB).
constexpr int64_t kEvalFloats = int64_t{1} << 23;

}  // namespace

absl::StatusOr<std::unique_ptr<Network>> Network::Create(const NetworkSpec& spec, int max_batch) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", max_batch, " must be at least 1"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(ModelGraph graph, ModelGraph::Create(spec));
  return std::unique_ptr<Network>(new Network(std::move(graph), max_batch));
}

Network::Network(ModelGraph graph, int max_batch)
    : graph_(std::move(graph)), max_batch_(max_batch) {
  // oneDNN fixes a primitive's thread count when it builds it (its layers
  // build theirs for max_batch here): the setting, not the calling
  // thread's OpenMP default of one per core.
  ApplyComputeThreads();
  const NetworkSpec& spec = graph_.spec();
  const std::vector<Shape>& shapes = graph_.shapes();
  std::vector<int> readers(shapes.size(), 0);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    for (int p : graph_.layer_inputs(static_cast<int>(i))) ++readers[p];
  }
  for (size_t p = 0; p < shapes.size(); ++p) storage_.push_back(graph_.storage(p));
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::vector<int>& reads = graph_.layer_inputs(static_cast<int>(i));
    std::vector<Shape> ins;
    for (int p : reads) ins.push_back(shapes[p]);
    // The last layer gives the logits: its softmax (or sigmoid) is the
    // loss's.
    LayerSpec computed = spec.layers[i];
    if (i + 1 == spec.layers.size()) computed.activation = Activation::kLinear;
    CpuLayerArgs args{computed, ins, shapes[i + 1], max_batch, graph_.kernel_at(i),
                      graph_.bias_at(i)};
    // A zero_padding2d read by this layer alone, which takes the zeros
    // into its own padding (oneDNN's convolutions do): the pad is never
    // computed, its output is its input's memory, read padded.
    const int p = reads[0];
    if (reads.size() == 1 && p > 0 && readers[p] == 1 && storage_[p] == p &&
        spec.layers[p - 1].kind == LayerKind::kZeroPadding2D &&
        KindDef(computed.kind).folds_padding() && CpuKernelsInUse() == CpuKernels::kOneDnn) {
      const std::vector<Shape> unpadded = {shapes[graph_.layer_inputs(p - 1)[0]]};
      CpuLayerArgs folded{computed,           unpadded,           shapes[i + 1], max_batch,
                          graph_.kernel_at(i), graph_.bias_at(i)};
      folded.padding = spec.layers[p - 1].padding;
      if (std::unique_ptr<Layer> layer = KindDef(computed.kind).CreateCpu(folded)) {
        storage_[p] = storage_[graph_.layer_inputs(p - 1)[0]];
        layers_.push_back(std::move(layer));
        ++folded_paddings_;
        continue;
      }
    }
    layers_.push_back(KindDef(computed.kind).CreateCpu(args));
  }
  int64_t widest = 0;
  for (const Shape& s : graph_.shapes()) widest += ShapeSize(s);
  eval_chunk_ = static_cast<int>(
      std::clamp<int64_t>(kEvalFloats / std::max<int64_t>(widest, 1), 1, max_batch));
  activations_.resize(graph_.shapes().size());
  deltas_.resize(graph_.shapes().size());
  act_.resize(graph_.shapes().size());
  delta_.resize(graph_.shapes().size());
  needs_grad_.resize(graph_.shapes().size());
  written_.resize(graph_.shapes().size());
  size_t most_inputs = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    most_inputs = std::max(most_inputs, graph_.layer_inputs(static_cast<int>(l)).size());
  }
  scratch_.resize(most_inputs);
  ins_.resize(most_inputs);
  d_ins_.resize(most_inputs);
}

void Network::EnsureScratch(int batch, bool gradients) {
  for (size_t i = 1; i < graph_.shapes().size(); ++i) {
    if (storage_[i] != static_cast<int>(i)) continue;  // a flatten or folded pad: its input
    const size_t n = static_cast<size_t>(batch) * ShapeSize(graph_.shapes()[i]);
    if (activations_[i].size() < n) activations_[i].resize(n);
    if (gradients && deltas_[i].size() < n) deltas_[i].resize(n);
  }
}

int Network::onednn_layers() const {
  int n = 0;
  for (const auto& layer : layers_) n += layer->on_onednn() ? 1 : 0;
  return n;
}

std::vector<GemmShape> Network::StepGemms(int batch) const {
  std::vector<GemmShape> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const bool input_grad = graph_.layer_inputs(l)[0] > 0 || !graph_.embeddings().empty();
    layers_[l]->AppendGemms(batch, input_grad, &out);
  }
  return out;
}

void Network::SetStepSeed(uint64_t seed) {
  for (size_t l = 0; l < layers_.size(); ++l) {
    // Each layer its own stream: the seed mixed with the layer's place (as
    // the CUDA layers draw it).
    layers_[l]->SetSeed(cuda_math::LayerSeed(seed, static_cast<int64_t>(l)));
  }
}

void Network::Forward(const float* params, const float* x, const int32_t* labels, int batch,
                      bool training, BatchResult* result) {
  act_[0] = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const std::vector<int>& reads = graph_.layer_inputs(l);
    // A flatten's output is its input's memory, read in the same order (a
    // folded pad's, read padded by the convolution after it).
    if (storage_[l + 1] != static_cast<int>(l) + 1) {
      act_[l + 1] = act_[reads[0]];
      continue;
    }
    float* out = activations_[l + 1].data();
    if (reads.size() == 1) {
      layers_[l]->Forward(params, act_[reads[0]], batch, training, out);
    } else {
      for (size_t j = 0; j < reads.size(); ++j) ins_[j] = act_[reads[j]];
      layers_[l]->ForwardInputs(params, ins_.data(), batch, training, out);
    }
    act_[l + 1] = out;
  }
  if (graph_.spec().binary()) {
    // The sigmoid in place, with loss, accuracy and the AUC's histograms:
    // loss = max(z, 0) - z y + log(1 + exp(-|z|)), stable for any z.
    float* p = activations_.back().data();
    result->scored.reserve(result->scored.size() + batch);
    for (int r = 0; r < batch; ++r) {
      const float z = p[r];
      const int y = labels[r];
      result->loss_sum += std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z)));
      result->correct += ((z > 0) == (y == 1));
      p[r] = 1.0f / (1.0f + std::exp(-z));
      result->AddScore(p[r], y);
    }
    result->count += batch;
    return;
  }
  // Softmax in place, with loss and accuracy.
  const int c = graph_.spec().num_classes();
  float* probs = activations_.back().data();  // the last layer is dense: its own buffer
  for (int r = 0; r < batch; ++r) {
    float* row = probs + r * c;
    const int argmax = static_cast<int>(std::max_element(row, row + c) - row);
    const float m = row[argmax];
    float sum = 0;
    for (int j = 0; j < c; ++j) {
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < c; ++j) row[j] *= inv;
    result->loss_sum += -std::log(std::max(row[labels[r]], 1e-30f));
    result->correct += (argmax == labels[r]);
  }
  result->count += batch;
}

absl::StatusOr<BatchResult> Network::ComputeGradients(
    const float* params, const float* x, const int32_t* labels, int batch, float* grads,
    const std::function<void(int layer)>& on_layer_done, float* input_grad) {
  ApplyComputeThreads();  // primitives built for a new batch size too
  if (batch < 1 || batch > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch, " is outside 1..", max_batch_));
  }
  absl::Status s = CheckLabels(labels, batch);
  if (!s.ok()) return s;
  EnsureScratch(batch, true);
  BatchResult result;
  Forward(params, x, labels, batch, /*training=*/true, &result);

  // dLoss/dlogits for the mean loss: (p - onehot) / batch (sigmoid: one
  // logit, (p - y) / batch).
  const int c = graph_.spec().binary() ? 1 : graph_.spec().num_classes();
  float* delta = deltas_.back().data();
  const float* probs = activations_.back().data();
  const float inv_batch = 1.0f / batch;
  for (int r = 0; r < batch; ++r) {
    if (graph_.spec().binary()) {
      delta[r] = (probs[r] - static_cast<float>(labels[r])) * inv_batch;
      continue;
    }
    for (int j = 0; j < c; ++j) {
      delta[r * c + j] = (probs[r * c + j] - (j == labels[r] ? 1.0f : 0.0f)) * inv_batch;
    }
  }
  // Where the loss gradient at each position goes: a flatten's output
  // gradient is its input's, in the same memory.
  // A position whose gradient reaches no variable (nor the input, unless
  // input_grad is asked for) gets none: the layers reading it skip their
  // input gradient (a first convolution's pass over the data, say), and
  // the layers writing it, variable-free, are skipped.
  needs_grad_[0] = input_grad != nullptr;
  for (size_t l = 0; l < layers_.size(); ++l) {
    bool needs = graph_.param_layer(l) >= 0;
    for (int r : graph_.layer_inputs(l)) needs = needs || needs_grad_[r];
    needs_grad_[l + 1] = needs;
  }
  delta_[0] = input_grad;
  for (size_t i = 1; i < graph_.shapes().size(); ++i) {
    if (!needs_grad_[i]) {
      delta_[i] = nullptr;
    } else {
      delta_[i] = storage_[i] == 0 ? input_grad : deltas_[storage_[i]].data();
    }
  }
  std::fill(written_.begin(), written_.end(), 0);
  written_.back() = 1;  // the logits' gradient, above
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    if (storage_[l + 1] != l + 1) continue;  // flatten, folded pad: readers wrote its input's
    if (delta_[l + 1] == nullptr) continue;  // nothing before it needs a gradient
    const std::vector<int>& reads = graph_.layer_inputs(l);
    // Each input's gradient: straight into the position's when nothing
    // has written it yet this pass, else into scratch added to it after.
    for (size_t j = 0; j < reads.size(); ++j) {
      const int at = storage_[reads[j]];
      ins_[j] = act_[reads[j]];
      if (delta_[at] == nullptr) {
        d_ins_[j] = nullptr;
      } else if (!written_[at]) {
        d_ins_[j] = delta_[at];
        written_[at] = 1;
      } else {
        const size_t n = static_cast<size_t>(batch) * ShapeSize(graph_.shapes()[at]);
        if (scratch_[j].size() < n) scratch_[j].resize(n);
        d_ins_[j] = scratch_[j].data();
      }
    }
    if (reads.size() == 1) {
      layers_[l]->Backward(params, ins_[0], act_[l + 1], delta_[l + 1], batch, grads, d_ins_[0]);
    } else {
      layers_[l]->BackwardInputs(params, ins_.data(), act_[l + 1], delta_[l + 1], batch, grads,
                                 d_ins_.data());
    }
    for (size_t j = 0; j < reads.size(); ++j) {
      float* d = delta_[storage_[reads[j]]];
      if (d_ins_[j] == nullptr || d_ins_[j] == d) continue;
      const int64_t n = batch * ShapeSize(graph_.shapes()[storage_[reads[j]]]);
      const float* __restrict add = d_ins_[j];
      for (int64_t k = 0; k < n; ++k) d[k] += add[k];
    }
    if (on_layer_done && graph_.param_layer(l) >= 0) on_layer_done(graph_.param_layer(l));
  }
  return result;
}

absl::StatusOr<BatchResult> Network::Evaluate(const float* params, const float* x,
                                              const int32_t* labels, int64_t n,
                                              std::vector<float>* outputs) {
  ApplyComputeThreads();
  absl::Status s = CheckLabels(labels, n);
  if (!s.ok()) return s;
  BatchResult result;
  const int64_t width = input_width();
  for (int64_t start = 0; start < n; start += eval_chunk_) {
    const int b = static_cast<int>(std::min<int64_t>(eval_chunk_, n - start));
    EnsureScratch(b, false);
    Forward(params, x + start * width, labels + start, b, /*training=*/false, &result);
    if (outputs != nullptr) {
      const float* out = activations_.back().data();  // probabilities, in place
      outputs->insert(outputs->end(), out, out + b * ShapeSize(graph_.shapes().back()));
    }
  }
  return result;
}

absl::StatusOr<BatchResult> EvaluateExamples(const Embeddings& embeddings,
                                             const TableRowFetcher& fetch,
                                             const data::Dataset& examples, int chunk,
                                             const ChunkEvaluator& evaluate) {
  const int64_t n = examples.num_examples;
  const int64_t input_dim = examples.example_dim;
  const int64_t ids_dim = examples.ids_dim;
  // Features held as bytes are widened a chunk at a time.
  const bool widen = examples.features.empty() && !examples.pixels.empty();
  std::vector<float> features;
  if (widen) features.resize(static_cast<size_t>(std::min<int64_t>(chunk, n) * input_dim));
  BatchResult total;
  EmbeddingBatch batch;
  std::vector<float> input;
  if (!embeddings.empty()) input.resize(static_cast<size_t>(chunk) * embeddings.output_width());
  for (int64_t start = 0; start < n; start += chunk) {
    const int b = static_cast<int>(std::min<int64_t>(chunk, n - start));
    const float* in;
    if (widen) {
      data::CopyFeatures(examples, start, b, features.data());
      in = features.data();
    } else {
      in = examples.features.data() + start * input_dim;
    }
    if (!embeddings.empty()) {
      const int64_t* ids = examples.ids.empty() ? nullptr : examples.ids.data() + start * ids_dim;
      if (absl::Status s = embeddings.MakeBags(in, ids, ids_dim, b, &batch); !s.ok()) return s;
      if (absl::Status s = embeddings.FetchRows(fetch, &batch); !s.ok()) return s;
      embeddings.Forward(batch, input.data());
      in = input.data();
    }
    absl::StatusOr<BatchResult> r = evaluate(in, examples.labels.data() + start, b);
    if (!r.ok()) return r.status();
    total.Add(*r);
  }
  return total;
}

}  // namespace pstrain::model
