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
#include "model/cuda_layer_math.h"

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
  // A model whose first layer reads id features may have no float input.
  bool ids_only = !spec.embeddings.empty();
  for (const EmbeddingBagSpec& e : spec.embeddings) ids_only = ids_only && e.from_feature();
  if (spec.input_dim < (ids_only ? 0 : 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input_dim is ", spec.input_dim, ": must be at least 1"));
  }
  if (spec.layers.empty()) return absl::InvalidArgumentError("model has no layers");
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", max_batch, " must be at least 1"));
  }
  absl::StatusOr<Embeddings> embeddings = Embeddings::Create(spec.embeddings, spec.input_dim);
  if (!embeddings.ok()) return embeddings.status();
  Shape shape = {spec.input_dim};
  if (!embeddings->empty()) {
    shape = embeddings->output_shape();
  } else if (!spec.input_shape.empty()) {
    for (int64_t d : spec.input_shape) {
      if (d < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model input_shape ", ShapeString(spec.input_shape), " has a dimension below 1"));
      }
    }
    if (ShapeSize(spec.input_shape) != spec.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("model input_shape ", ShapeString(spec.input_shape), " holds ",
                       ShapeSize(spec.input_shape), " values but input_dim is ", spec.input_dim));
    }
    shape = spec.input_shape;
  }
  std::vector<Shape> shapes = {shape};
  std::vector<std::vector<int>> inputs;
  // The position each name's output holds (0: the input).
  std::map<std::string, int> position;
  bool graph = false;
  for (const LayerSpec& l : spec.layers) graph = graph || !l.inputs.empty();
  if (graph) position["input"] = 0;
  std::set<std::string> embedding_names;
  for (const EmbeddingBagSpec& e : spec.embeddings) embedding_names.insert(e.name);
  std::vector<int> readers(spec.layers.size() + 1, 0);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string where =
        absl::StrCat("model layer ", i, " (", l.name.empty() ? "no name" : l.name, "): ");
    if (l.name.empty()) return absl::InvalidArgumentError(where + "name is missing");
    if (embedding_names.count(l.name) > 0) {
      return absl::InvalidArgumentError(where + "the name is an embedding's too");
    }
    if (graph && l.name == "input") {
      return absl::InvalidArgumentError(
          where + "\"input\" names the model's input in a model whose layers name their inputs");
    }
    if (position.count(l.name) > 0) {
      return absl::InvalidArgumentError(where + "the name is used twice");
    }
    std::vector<int> reads;
    for (const std::string& name : l.inputs) {
      auto it = position.find(name);
      if (it == position.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "input \"", name, "\" is not a layer before this one",
            embedding_names.count(name) > 0
                ? " (the embeddings' output is the layers' input: name it \"input\")"
                : " (nor \"input\", the model's input)"));
      }
      reads.push_back(it->second);
    }
    if (reads.empty()) reads.push_back(static_cast<int>(i));
    std::vector<Shape> in;
    for (int p : reads) {
      in.push_back(shapes[p]);
      ++readers[p];
    }
    absl::StatusOr<Shape> out = LayerOutputShapeForInputs(l, in);
    if (!out.ok()) return absl::InvalidArgumentError(where + std::string(out.status().message()));
    if (l.activation == Activation::kSoftmax && i + 1 < spec.layers.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "activation ", kSoftmaxOnlyLast));
    }
    if (l.has_kernel()) {
      auto kernel = ParseInitializerSpec(l.kernel_initializer, /*allow_glorot=*/true);
      if (!kernel.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "kernel initializer ", kernel.status().message()));
      }
      auto bias = ParseInitializerSpec(l.bias_initializer);
      if (!bias.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "bias initializer ", bias.status().message()));
      }
    }
    if (i + 1 == spec.layers.size()) {
      if (l.kind != LayerKind::kDense) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer gives the logits of ", LossName(spec.loss),
                         ": it must be dense, not ", LayerKindName(l.kind)));
      }
      // Keras's classifiers end in the loss's own function (softmax, or
      // sigmoid for one logit): the loss applies it here, on the logits.
      const Activation own = spec.binary() ? Activation::kSigmoid : Activation::kSoftmax;
      if (l.relu || (l.activation != Activation::kLinear && l.activation != own)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "the last layer gives the logits of ", LossName(spec.loss),
            ": no activation (or ", ActivationName(own), ", which the loss applies)"));
      }
      if (spec.binary() && l.units != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "a sigmoid loss takes one logit, but the last layer has ", l.units, " units"));
      }
      if (!spec.binary() && l.units < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer needs one unit per class, at least 2"));
      }
    }
    shapes.push_back(*std::move(out));
    inputs.push_back(std::move(reads));
    position[l.name] = static_cast<int>(i) + 1;
  }
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i) {
    if (readers[i + 1] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model layer ", i, " (", spec.layers[i].name,
          "): no later layer reads its output (only the last layer's is the model's)"));
    }
  }
  return std::unique_ptr<Network>(new Network(spec, max_batch, *std::move(embeddings),
                                              std::move(shapes), std::move(inputs)));
}

Network::Network(const NetworkSpec& spec, int max_batch, Embeddings embeddings,
                 std::vector<Shape> shapes, std::vector<std::vector<int>> inputs)
    : spec_(spec),
      max_batch_(max_batch),
      embeddings_(std::move(embeddings)),
      shapes_(std::move(shapes)),
      inputs_(std::move(inputs)) {
  storage_.push_back(0);
  for (size_t l = 0; l < inputs_.size(); ++l) {
    sequential_ = sequential_ && inputs_[l] == std::vector<int>{static_cast<int>(l)};
    storage_.push_back(spec.layers[l].kind == LayerKind::kFlatten ? storage_[inputs_[l][0]]
                                                                  : static_cast<int>(l) + 1);
  }
  int64_t widest = 0;
  // Each variable's place in the job's initial stream (cluster/
  // initial_stream.h): uniform ones draw one value per element, in layer
  // order, kernel then bias; zeros draw nothing.
  int64_t draws = 0;
  auto initializer = [&draws](const InitializerSpec& init, float glorot_limit,
                              const Shape& shape) -> std::string {
    if (init.kind == InitializerSpec::Kind::kZeros) return "zeros";
    if (init.kind == InitializerSpec::Kind::kOnes) return "ones";
    const float limit =
        init.kind == InitializerSpec::Kind::kGlorotUniform ? glorot_limit : init.limit;
    const std::string spec = StreamInitializer({limit, draws});
    draws += ShapeSize(shape);
    return spec;
  };
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    int64_t kernel_at = -1, bias_at = -1;
    param_layer_.push_back(-1);
    // A frozen layer's variables (trainable: false) are never pushed.
    const VariableUpdate trained =
        l.trainable ? VariableUpdate::kOptimizer : VariableUpdate::kFrozen;
    const int number = layout_.num_layers();
    // Adds "<name>/<suffix>" to the flat array as this layer's; its offset.
    auto add = [&](const char* suffix, const Shape& shape, std::string init, ParamRole role,
                   VariableUpdate update) {
      const int64_t at = layout_.num_parameters();
      VariableDef def{absl::StrCat(l.name, "/", suffix), shape};
      def.initializer = std::move(init);
      def.update = update;
      layout_.AddFlat(std::move(def), number, role);
      return at;
    };
    if (l.kind == LayerKind::kBatchNormalization) {
      const Shape channels{shapes_[inputs_[i][0]].back()};
      kernel_at = layout_.num_parameters();
      if (l.scale) add("gamma", channels, "ones", ParamRole::kGamma, trained);
      if (l.center) add("beta", channels, "zeros", ParamRole::kBeta, trained);
      const VariableUpdate moving =
          l.trainable ? VariableUpdate::kIncrement : VariableUpdate::kFrozen;
      add("moving_mean", channels, "zeros", ParamRole::kMovingMean, moving);
      add("moving_variance", channels, "ones", ParamRole::kMovingVariance, moving);
      param_layer_.back() = number;
    } else if (l.has_kernel()) {
      const Shape& in = shapes_[inputs_[i][0]];
      const std::vector<Shape> vars = LayerVariableShapes(l, in);
      // Both were checked by Create.
      const InitializerSpec kernel_init = *ParseInitializerSpec(l.kernel_initializer, true);
      const InitializerSpec bias_init = *ParseInitializerSpec(l.bias_initializer);
      int64_t fan_in = 0, fan_out = 0;
      KernelFans(l, in, &fan_in, &fan_out);
      const float glorot = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
      kernel_at = add(l.kernel_name(), vars[0], initializer(kernel_init, glorot, vars[0]),
                      ParamRole::kKernel, trained);
      if (l.use_bias) {
        bias_at = add("bias", vars[1], initializer(bias_init, 0.0f, vars[1]), ParamRole::kBias,
                      trained);
      }
      param_layer_.back() = number;
    }
    std::vector<Shape> ins;
    for (int p : inputs_[i]) ins.push_back(shapes_[p]);
    // The last layer gives the logits: its softmax (or sigmoid) is the
    // loss's.
    LayerSpec computed = l;
    if (i + 1 == spec.layers.size()) computed.activation = Activation::kLinear;
    layers_.push_back(Layer::CreateForInputs(computed, ins, max_batch, kernel_at, bias_at));
  }
  for (const Shape& s : shapes_) widest += ShapeSize(s);
  eval_chunk_ = static_cast<int>(
      std::clamp<int64_t>(kEvalFloats / std::max<int64_t>(widest, 1), 1, max_batch));
  for (int i = 0; i < embeddings_.size(); ++i) {
    const EmbeddingBagSpec& e = embeddings_[i].spec();
    VariableDef table{e.table(), {e.vocabulary, e.dim}};
    table.embedding = true;
    table.consistency = spec_.sync_tables ? Consistency::Sync() : Consistency::Async();
    table.initializer = e.initializer;
    layout_.AddTable(std::move(table));
  }
  activations_.resize(shapes_.size());
  deltas_.resize(shapes_.size());
  act_.resize(shapes_.size());
  delta_.resize(shapes_.size());
  needs_grad_.resize(shapes_.size());
  written_.resize(shapes_.size());
  size_t most_inputs = 0;
  for (const std::vector<int>& in : inputs_) most_inputs = std::max(most_inputs, in.size());
  scratch_.resize(most_inputs);
  ins_.resize(most_inputs);
  d_ins_.resize(most_inputs);
}

void Network::EnsureScratch(int batch, bool gradients) {
  for (size_t i = 1; i < shapes_.size(); ++i) {
    if (storage_[i] != static_cast<int>(i)) continue;  // a flatten's: its input's memory
    const size_t n = static_cast<size_t>(batch) * ShapeSize(shapes_[i]);
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
    layers_[l]->AppendGemms(batch, inputs_[l][0] > 0 || !embeddings_.empty(), &out);
  }
  return out;
}

std::vector<float> Network::InitialParameters(uint64_t seed) const {
  std::vector<float> params(num_parameters(), 0.0f);
  InitialStream stream(seed);
  for (size_t v = 0; v < variables().size(); ++v) {
    const VariableDef& def = variables()[v];
    if (def.embedding) continue;
    if (def.initializer == "ones") {
      std::fill_n(params.data() + offsets()[v], def.elements(), 1.0f);
      continue;
    }
    if (!IsStreamInitializer(def.initializer)) continue;  // zeros
    const StreamPlace place = *ParseStreamInitializer(def.initializer);  // made above
    stream.Fill(place.first_draw, place.limit, def.elements(), params.data() + offsets()[v]);
  }
  return params;
}

void Network::SetStepSeed(uint64_t seed) {
  for (size_t l = 0; l < layers_.size(); ++l) {
    // Each layer its own stream: the seed mixed with the layer's place (as
    // the CUDA layers draw it).
    layers_[l]->SetSeed(cuda_math::LayerSeed(seed, static_cast<int64_t>(l)));
  }
}

absl::Status Network::CheckLabels(const int32_t* labels, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= spec_.num_classes()) {
      return absl::InvalidArgumentError(absl::StrCat("label ", labels[i], " of example ", i,
                                                     " is outside [0, ", spec_.num_classes(), ")"));
    }
  }
  return absl::OkStatus();
}

void Network::Forward(const float* params, const float* x, const int32_t* labels, int batch,
                      bool training, BatchResult* result) {
  act_[0] = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const std::vector<int>& reads = inputs_[l];
    // A flatten's output is its input's memory, read in the same order.
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
  if (spec_.binary()) {
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
  const int c = spec_.num_classes();
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
  const int c = spec_.binary() ? 1 : spec_.num_classes();
  float* delta = deltas_.back().data();
  const float* probs = activations_.back().data();
  const float inv_batch = 1.0f / batch;
  for (int r = 0; r < batch; ++r) {
    if (spec_.binary()) {
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
    bool needs = param_layer_[l] >= 0;
    for (int r : inputs_[l]) needs = needs || needs_grad_[r];
    needs_grad_[l + 1] = needs;
  }
  delta_[0] = input_grad;
  for (size_t i = 1; i < shapes_.size(); ++i) {
    if (!needs_grad_[i]) {
      delta_[i] = nullptr;
    } else {
      delta_[i] = storage_[i] == 0 ? input_grad : deltas_[storage_[i]].data();
    }
  }
  std::fill(written_.begin(), written_.end(), 0);
  written_.back() = 1;  // the logits' gradient, above
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    if (storage_[l + 1] != l + 1) continue;  // a flatten: its readers wrote its input's
    if (delta_[l + 1] == nullptr) continue;  // nothing before it needs a gradient
    const std::vector<int>& reads = inputs_[l];
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
        const size_t n = static_cast<size_t>(batch) * ShapeSize(shapes_[at]);
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
      const int64_t n = batch * ShapeSize(shapes_[storage_[reads[j]]]);
      const float* __restrict add = d_ins_[j];
      for (int64_t k = 0; k < n; ++k) d[k] += add[k];
    }
    if (on_layer_done && param_layer_[l] >= 0) on_layer_done(param_layer_[l]);
  }
  return result;
}

absl::StatusOr<BatchResult> Network::Evaluate(const float* params, const float* x,
                                              const int32_t* labels, int64_t n,
                                              std::vector<float>* outputs) {
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
      outputs->insert(outputs->end(), out, out + b * ShapeSize(shapes_.back()));
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
