#include "model/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/initializer_spec.h"

namespace pstrain::model {

MlpSpec MlpSpec::FromWidths(int input_dim, const std::vector<int>& hidden, int num_classes) {
  MlpSpec spec;
  spec.input_dim = input_dim;
  for (size_t i = 0; i <= hidden.size(); ++i) {
    DenseLayerSpec layer;
    layer.name = absl::StrCat("dense_", i);
    layer.units = i < hidden.size() ? hidden[i] : num_classes;
    layer.relu = i < hidden.size();
    spec.layers.push_back(layer);
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(const MlpSpec& spec,
                                                 int max_batch) {
  if (spec.input_dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input_dim is ", spec.input_dim, ": must be at least 1"));
  }
  if (spec.layers.empty()) return absl::InvalidArgumentError("model has no layers");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const DenseLayerSpec& l = spec.layers[i];
    const std::string where =
        absl::StrCat("model layer ", i, " (", l.name.empty() ? "no name" : l.name, "): ");
    if (l.name.empty()) return absl::InvalidArgumentError(where + "name is missing");
    if (!names.insert(l.name).second) {
      return absl::InvalidArgumentError(where + "the name is used twice");
    }
    if (l.units < 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, "has ", l.units, " units"));
    }
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
    if (i + 1 == spec.layers.size()) {
      if (l.relu) {
        return absl::InvalidArgumentError(
            where + "the last layer gives the logits of softmax cross-entropy: no activation");
      }
      if (l.units < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer needs one unit per class, at least 2"));
      }
    }
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", max_batch, " must be at least 1"));
  }
  std::optional<EmbeddingBag> bag;
  if (spec.embedding_bag.enabled()) {
    auto created = EmbeddingBag::Create(spec.embedding_bag, spec.input_dim);
    if (!created.ok()) return created.status();
    if (names.count(spec.embedding_bag.name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding_bag ", spec.embedding_bag.name, ": the name is used by a dense layer too"));
    }
    bag = std::move(*created);
  }
  return std::unique_ptr<Mlp>(new Mlp(spec, max_batch, std::move(bag)));
}

Mlp::Mlp(const MlpSpec& spec, int max_batch, std::optional<EmbeddingBag> bag)
    : spec_(spec), max_batch_(max_batch), bag_(std::move(bag)) {
  dims_.push_back(bag_.has_value() ? bag_->dim() : spec.input_dim);
  for (const DenseLayerSpec& l : spec.layers) dims_.push_back(l.units);
  const int layers = static_cast<int>(dims_.size()) - 1;
  for (int i = 0; i < layers; ++i) {
    const std::string& name = spec.layers[i].name;
    layout_.AddFlat({name + "/kernel", {dims_[i], dims_[i + 1]}}, i, ParamRole::kKernel);
    layout_.AddFlat({name + "/bias", {dims_[i + 1]}}, i, ParamRole::kBias);
  }
  if (bag_.has_value()) {
    VariableDef table{bag_->spec().table(), {bag_->spec().vocabulary, bag_->dim()}};
    table.embedding = true;
    table.consistency = "async";
    table.initializer = bag_->spec().initializer;
    layout_.AddTable(std::move(table));
  }
  kernel_at_ = layout_.LayerOffsets(ParamRole::kKernel);
  bias_at_ = layout_.LayerOffsets(ParamRole::kBias);
  activations_.resize(dims_.size());
  deltas_.resize(dims_.size());
  for (size_t i = 1; i < dims_.size(); ++i) {
    activations_[i].resize(static_cast<size_t>(max_batch) * dims_[i]);
    deltas_[i].resize(static_cast<size_t>(max_batch) * dims_[i]);
  }
}

std::vector<float> Mlp::InitialParameters(uint64_t seed) const {
  std::vector<float> params(num_parameters(), 0.0f);
  std::mt19937_64 rng(seed);
  auto fill = [&rng](float limit, float* out, int64_t n) {
    std::uniform_real_distribution<float> dist(-limit, limit);
    for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
  };
  for (size_t l = 0; l + 1 < dims_.size(); ++l) {
    const DenseLayerSpec& layer = spec_.layers[l];
    const int64_t fan = static_cast<int64_t>(dims_[l]) * dims_[l + 1];
    // Both were checked by Create.
    const InitializerSpec kernel = *ParseInitializerSpec(layer.kernel_initializer, true);
    const InitializerSpec bias = *ParseInitializerSpec(layer.bias_initializer);
    if (kernel.kind == InitializerSpec::Kind::kGlorotUniform) {
      fill(std::sqrt(6.0f / (dims_[l] + dims_[l + 1])), params.data() + kernel_at_[l], fan);
    } else if (kernel.kind == InitializerSpec::Kind::kUniform) {
      fill(kernel.limit, params.data() + kernel_at_[l], fan);
    }
    if (bias.kind == InitializerSpec::Kind::kUniform) {
      fill(bias.limit, params.data() + bias_at_[l], dims_[l + 1]);
    }
  }
  return params;
}

absl::Status Mlp::CheckLabels(const int32_t* labels, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= spec_.num_classes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", labels[i], " of example ", i, " is outside [0, ",
          spec_.num_classes(), ")"));
    }
  }
  return absl::OkStatus();
}

void Mlp::Forward(const float* params, const float* x, const int32_t* labels,
                  int batch, BatchResult* result) {
  const int layers = static_cast<int>(dims_.size()) - 1;
  const float* in = x;
  for (int l = 0; l < layers; ++l) {
    const int k = dims_[l], n = dims_[l + 1];
    const float* w = params + kernel_at_[l];
    const float* b = params + bias_at_[l];
    float* out = activations_[l + 1].data();
    for (int r = 0; r < batch; ++r) std::memcpy(out + r * n, b, n * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, n, k, 1.0f,
                in, k, w, n, 1.0f, out, n);
    if (spec_.layers[l].relu) {
      for (int64_t i = 0; i < static_cast<int64_t>(batch) * n; ++i) {
        out[i] = std::max(out[i], 0.0f);
      }
    }
    in = out;
  }
  // Softmax in place, with loss and accuracy.
  const int c = dims_.back();
  float* probs = activations_.back().data();
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

absl::StatusOr<BatchResult> Mlp::ComputeGradients(
    const float* params, const float* x, const int32_t* labels, int batch, float* grads,
    const std::function<void(int layer)>& on_layer_done, float* input_grad) {
  if (batch < 1 || batch > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", batch, " is outside 1..", max_batch_));
  }
  absl::Status s = CheckLabels(labels, batch);
  if (!s.ok()) return s;
  BatchResult result;
  Forward(params, x, labels, batch, &result);

  const int layers = static_cast<int>(dims_.size()) - 1;
  // dLoss/dlogits for the mean loss: (p - onehot) / batch.
  const int c = dims_.back();
  float* delta = deltas_.back().data();
  const float* probs = activations_.back().data();
  const float inv_batch = 1.0f / batch;
  for (int r = 0; r < batch; ++r) {
    for (int j = 0; j < c; ++j) {
      delta[r * c + j] = (probs[r * c + j] - (j == labels[r] ? 1.0f : 0.0f)) * inv_batch;
    }
  }
  for (int l = layers - 1; l >= 0; --l) {
    const int k = dims_[l], n = dims_[l + 1];
    const float* in = l == 0 ? x : activations_[l].data();
    const float* d = deltas_[l + 1].data();
    float* gw = grads + kernel_at_[l];
    float* gb = grads + bias_at_[l];
    // dW = in^T * delta  (k x n)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, batch, 1.0f, in,
                k, d, n, 0.0f, gw, n);
    std::fill(gb, gb + n, 0.0f);
    for (int r = 0; r < batch; ++r) {
      for (int j = 0; j < n; ++j) gb[j] += d[r * n + j];
    }
    if (l > 0) {
      // delta_in = (delta * W^T) masked by ReLU'(in).
      const float* w = params + kernel_at_[l];
      float* din = deltas_[l].data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, k, n, 1.0f, d,
                  n, w, n, 0.0f, din, k);
      if (spec_.layers[l - 1].relu) {
        const float* a = activations_[l].data();
        for (int64_t i = 0; i < static_cast<int64_t>(batch) * k; ++i) {
          if (a[i] <= 0.0f) din[i] = 0.0f;
        }
      }
    } else if (input_grad != nullptr) {
      // dx = delta * W^T (the input has no activation of ours).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, k, n, 1.0f, d, n,
                  params + kernel_at_[0], n, 0.0f, input_grad, k);
    }
    if (on_layer_done) on_layer_done(l);
  }
  return result;
}

absl::StatusOr<BatchResult> Mlp::Evaluate(const float* params, const float* x,
                                          const int32_t* labels, int64_t n) {
  absl::Status s = CheckLabels(labels, n);
  if (!s.ok()) return s;
  BatchResult result;
  for (int64_t start = 0; start < n; start += max_batch_) {
    const int b = static_cast<int>(std::min<int64_t>(max_batch_, n - start));
    Forward(params, x + start * dims_[0], labels + start, b, &result);
  }
  return result;
}

absl::StatusOr<BatchResult> EvaluateExamples(const EmbeddingBag* bag, const RowFetcher& fetch,
                                             const float* x, const int32_t* labels, int64_t n,
                                             int input_dim, int chunk,
                                             const ChunkEvaluator& evaluate) {
  BatchResult total;
  Bags bags;
  std::vector<float> rows, input;
  if (bag != nullptr) input.resize(static_cast<size_t>(chunk) * bag->dim());
  for (int64_t start = 0; start < n; start += chunk) {
    const int b = static_cast<int>(std::min<int64_t>(chunk, n - start));
    const float* in = x + start * input_dim;
    if (bag != nullptr) {
      bag->MakeBags(in, b, &bags);
      rows.resize(bags.unique_ids.size() * bag->dim());
      if (absl::Status s = fetch(bags.unique_ids, rows.data()); !s.ok()) return s;
      bag->Forward(bags, rows.data(), input.data());
      in = input.data();
    }
    absl::StatusOr<BatchResult> r = evaluate(in, labels + start, b);
    if (!r.ok()) return r.status();
    total.loss_sum += r->loss_sum;
    total.correct += r->correct;
    total.count += r->count;
  }
  return total;
}

}  // namespace pstrain::model
