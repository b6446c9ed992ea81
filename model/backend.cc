#include "model/backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "model/compute_threads.h"
#include "model/cuda_device.h"
#include "model/cuda_mlp_kernels.h"
#include "model/cuda_net_kernels.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class CpuBackend final : public Backend {
 public:
  // `not_cuda`: why --device=auto did not pick CUDA ("" when the CPU was
  // asked for), said where the task says what it computes on.
  CpuBackend(std::unique_ptr<Network> net, std::string not_cuda)
      : net_(std::move(net)), not_cuda_(std::move(not_cuda)) {
    SetBlasThreadsFor(net_->onednn_layers() > 0);
  }
  std::string name() const override { return "cpu"; }
  std::string Describe() const override {
    const int threads = openblas_get_num_threads();
    const int onednn = net_->onednn_layers();
    const int compute = ComputeThreads();
    return absl::StrCat(
        "cpu: ",
        onednn == 0 ? ""
                    : absl::StrCat("oneDNN (", onednn, onednn == 1 ? " layer" : " layers", ") on ",
                                   compute, compute == 1 ? " thread, " : " threads, "),
        "OpenBLAS sgemm, ", threads, threads == 1 ? " thread, " : " threads, ",
        openblas_get_corename(), " kernels",
        not_cuda_.empty() ? "" : absl::StrCat(" (device auto: ", not_cuda_, ")"));
  }
  const Network& network() const override { return *net_; }
  absl::StatusOr<BatchResult> ComputeGradients(const float* params, const float* x,
                                               const int32_t* labels, int batch, float* grads,
                                               const std::function<void(int layer)>& on_layer_done,
                                               float* input_grad) override {
    return net_->ComputeGradients(params, x, labels, batch, grads, on_layer_done, input_grad);
  }
  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x, const int32_t* labels,
                                       int64_t n) override {
    return net_->Evaluate(params, x, labels, n);
  }
  void SetStepSeed(uint64_t seed) override { net_->SetStepSeed(seed); }

 private:
  std::unique_ptr<Network> net_;
  const std::string not_cuda_;
};

// Unimplemented, naming the first thing the CUDA layers do not compute: a
// graph (layers that name their inputs), a layer kind or an activation
// other than ReLU beyond the conv1d/conv2d/pooling/dropout stack.
absl::Status CudaRunsModel(const Network& net) {
  auto cpu_only = [](const LayerSpec& l, const std::string& what) {
    return absl::UnimplementedError(absl::StrCat("cuda: the CUDA layers do not compute ", what,
                                                 " (layer ", l.name,
                                                 "): the model runs on --device=cpu"));
  };
  const std::vector<LayerSpec>& layers = net.spec().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    if (!net.sequential() && !l.inputs.empty()) {
      return cpu_only(l, absl::StrCat("a graph (this layer reads ", absl::StrJoin(l.inputs, ", "),
                                      ")"));
    }
    // The last layer's softmax (or sigmoid) is the loss's.
    LayerSpec computed = l;
    if (i + 1 == layers.size()) computed.activation = Activation::kLinear;
    PstrainCudaLayer d{};
    const Shape& in = net.input_shape(static_cast<int>(i));
    if (absl::Status s = KindDef(l.kind).DescribeCuda(computed, in, &d); !s.ok()) {
      return cpu_only(l, std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

// Dense layers and softmax only: the MLP kernels, whose copies overlap the
// layers (model/cuda_mlp_kernels.h). Anything else: the layer stack
// (model/cuda_net_kernels.h).
bool RunsAsMlp(const NetworkSpec& spec) {
  if (spec.binary()) return false;
  for (const LayerSpec& l : spec.layers) {
    if (l.kind != LayerKind::kDense) return false;
  }
  return true;
}

// The layer stack's description of `net`'s layers.
std::vector<PstrainCudaLayer> CudaLayers(const Network& net) {
  const std::vector<int64_t> kernel_at = net.layout().LayerOffsets(ParamRole::kKernel);
  const std::vector<int64_t> bias_at = net.layout().LayerOffsets(ParamRole::kBias);
  std::vector<PstrainCudaLayer> out;
  size_t with_variables = 0;
  for (size_t l = 0; l < net.spec().layers.size(); ++l) {
    const LayerSpec& spec = net.spec().layers[l];
    const Shape& in = net.shapes()[l];
    PstrainCudaLayer d{};
    d.in_size = ShapeSize(in);
    d.out_size = ShapeSize(net.shapes()[l + 1]);
    d.units = spec.units;
    d.relu = spec.relu ? 1 : 0;
    d.kernel_at = -1;
    d.bias_at = -1;
    if (spec.has_kernel()) {
      d.kernel_at = kernel_at[with_variables];
      d.bias_at = bias_at[with_variables];
      ++with_variables;
    }
    LayerSpec computed = spec;
    if (l + 1 == net.spec().layers.size()) computed.activation = Activation::kLinear;
    // CudaRunsModel checked that every layer has one.
    KindDef(spec.kind).DescribeCuda(computed, in, &d).IgnoreError();
    out.push_back(d);
  }
  return out;
}

class CudaBackend final : public Backend {
 public:
  // On CUDA device `index`.
  static absl::StatusOr<std::unique_ptr<Backend>> Create(std::unique_ptr<Network> net,
                                                         int max_batch, int index) {
    // What the CUDA layers cannot compute is said first: no device would.
    if (absl::Status s = CudaRunsModel(*net); !s.ok()) return s;
    auto devices = ListCudaDevices();
    if (!devices.ok()) return devices.status();
    if (index < 0 || index >= static_cast<int>(devices->size())) {
      return absl::UnavailableError(absl::StrCat("cuda: no device ", index, " (", devices->size(),
                                                 " usable)"));
    }
    const CudaDeviceInfo& d = (*devices)[index];
    const std::string description =
        absl::StrCat("cuda: device ", d.index, " ", d.name, " (sm_", d.major, d.minor, ")");
    const ParamLayout& layout = net->layout();
    char err[512] = {0};
    if (RunsAsMlp(net->spec())) {
      std::vector<int> dims = {net->input_width()}, relu;
      for (const LayerSpec& l : net->spec().layers) {
        dims.push_back(l.units);
        relu.push_back(l.relu ? 1 : 0);
      }
      const std::vector<int64_t> kernel_at = layout.LayerOffsets(ParamRole::kKernel);
      const std::vector<int64_t> bias_at = layout.LayerOffsets(ParamRole::kBias);
      PstrainCudaMlp* handle = nullptr;
      if (pstrain_cuda_mlp_create(d.index, dims.data(), relu.data(), static_cast<int>(relu.size()),
                                  kernel_at.data(), bias_at.data(), layout.num_parameters(),
                                  max_batch, &handle, err, sizeof(err)) != 0) {
        pstrain_cuda_mlp_destroy(handle);
        return absl::UnavailableError(absl::StrCat("cuda: ", err));
      }
      return std::unique_ptr<Backend>(
          new CudaBackend(std::move(net), handle, nullptr, max_batch, description));
    }
    const std::vector<PstrainCudaLayer> layers = CudaLayers(*net);
    PstrainCudaNet* handle = nullptr;
    if (pstrain_cuda_net_create(
            d.index, layers.data(), static_cast<int>(layers.size()), net->input_width(),
            net->spec().binary() ? 1 : 0, net->spec().binary() ? 1 : net->spec().num_classes(),
            layout.num_parameters(), max_batch, &handle, err, sizeof(err)) != 0) {
      pstrain_cuda_net_destroy(handle);
      return absl::UnavailableError(absl::StrCat("cuda: ", err));
    }
    return std::unique_ptr<Backend>(
        new CudaBackend(std::move(net), nullptr, handle, max_batch, description));
  }
  ~CudaBackend() override {
    pstrain_cuda_mlp_destroy(mlp_handle_);
    pstrain_cuda_net_destroy(net_handle_);
  }

  std::string name() const override { return "cuda"; }
  std::string Describe() const override { return description_; }
  const Network& network() const override { return *net_; }

  absl::StatusOr<BatchResult> ComputeGradients(const float* params, const float* x,
                                               const int32_t* labels, int batch, float* grads,
                                               const std::function<void(int layer)>& on_layer_done,
                                               float* input_grad) override {
    if (batch < 1 || batch > max_batch_) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", batch, " is outside 1..", max_batch_));
    }
    if (absl::Status s = net_->CheckLabels(labels, batch); !s.ok()) return s;
    BatchResult r;
    PSTRAIN_RETURN_IF_ERROR(Run(params, x, labels, batch, grads, input_grad, &r));
    if (on_layer_done) {
      for (int l = layers_with_variables_ - 1; l >= 0; --l) on_layer_done(l);
    }
    return r;
  }

  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x, const int32_t* labels,
                                       int64_t n) override {
    if (absl::Status s = net_->CheckLabels(labels, n); !s.ok()) return s;
    BatchResult r;
    const int64_t dim = net_->input_width();
    for (int64_t start = 0; start < n; start += max_batch_) {
      const int b = static_cast<int>(std::min<int64_t>(max_batch_, n - start));
      PSTRAIN_RETURN_IF_ERROR(
          Run(params, x + start * dim, labels + start, b, nullptr, nullptr, &r));
    }
    return r;
  }

  void SetStepSeed(uint64_t seed) override { step_seed_ = seed; }

  void LastStepTiming(double* copy_seconds, double* total_seconds) const override {
    if (mlp_handle_ != nullptr) {
      pstrain_cuda_mlp_last_timing(mlp_handle_, copy_seconds, total_seconds);
    } else {
      pstrain_cuda_net_last_timing(net_handle_, copy_seconds, total_seconds);
    }
  }

 private:
  CudaBackend(std::unique_ptr<Network> net, PstrainCudaMlp* mlp_handle, PstrainCudaNet* net_handle,
              int max_batch, std::string description)
      : net_(std::move(net)),
        mlp_handle_(mlp_handle),
        net_handle_(net_handle),
        max_batch_(max_batch),
        description_(std::move(description)),
        layers_with_variables_(
            static_cast<int>(net_->layout().LayerOffsets(ParamRole::kKernel).size())) {}

  // One batch on whichever kernels run this model; adds to *r (and, with
  // the sigmoid loss, each example's score for the AUC).
  absl::Status Run(const float* params, const float* x, const int32_t* labels, int batch,
                   float* grads, float* input_grad, BatchResult* r) {
    char err[512] = {0};
    int rc = 0;
    if (mlp_handle_ != nullptr) {
      rc = pstrain_cuda_mlp_run(mlp_handle_, params, x, labels, batch, grads, input_grad,
                                &r->loss_sum, &r->correct, err, sizeof(err));
    } else {
      if (probs_.size() < static_cast<size_t>(batch)) probs_.resize(batch);
      rc =
          pstrain_cuda_net_run(net_handle_, params, x, labels, batch, step_seed_, grads, input_grad,
                               &r->loss_sum, &r->correct, probs_.data(), err, sizeof(err));
    }
    if (rc != 0) return absl::InternalError(absl::StrCat("cuda: ", err));
    r->count += batch;
    if (net_->spec().binary()) {
      for (int i = 0; i < batch; ++i) r->AddScore(probs_[i], labels[i]);
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Network> net_;
  PstrainCudaMlp* const mlp_handle_;  // one of the two
  PstrainCudaNet* const net_handle_;
  const int max_batch_;
  const std::string description_;
  const int layers_with_variables_;  // the layout's layers: on_layer_done's numbers
  uint64_t step_seed_ = 0;
  std::vector<float> probs_;  // the sigmoid's scores of the last batch
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const NetworkSpec& spec, int max_batch,
                                                       Device device) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", max_batch, " must be at least 1"));
  }
  std::string not_cuda;
  if (device.kind != Device::Kind::kCpu) {
    auto cuda_mlp = Network::Create(spec, 1);  // layout and label checks only
    if (!cuda_mlp.ok()) return cuda_mlp.status();
    auto cuda = CudaBackend::Create(*std::move(cuda_mlp), max_batch, device.index);
    if (device.kind == Device::Kind::kCuda) return cuda;
    if (cuda.ok()) {
      // auto: a device that takes our buffers may still not run our kernels
      // (a compute capability they were not built for); one small kernel
      // decides before training starts.
      std::vector<float> values(4, 1.0f), grads(4, 1.0f);
      absl::Status probe = CudaSgdUpdate(absl::MakeSpan(values), grads, 0.5f);
      if (probe.ok() && values[0] == 0.5f && values[3] == 0.5f) return cuda;
      cuda = probe.ok() ? absl::InternalError("the probe kernel computed a wrong value") : probe;
    }
    not_cuda = absl::StrCat(
        cuda.status().code() == absl::StatusCode::kUnimplemented ? "" : "no usable CUDA device: ",
        cuda.status().message());
  }
  // The CPU's scratch for max_batch rows, only when it computes.
  auto net = Network::Create(spec, max_batch);
  if (!net.ok()) return net.status();
  return std::unique_ptr<Backend>(new CpuBackend(*std::move(net), std::move(not_cuda)));
}

absl::StatusOr<double> CudaGemmSeconds(int device, const std::vector<GemmShape>& gemms,
                                       double min_seconds) {
  if (gemms.empty()) return absl::InvalidArgumentError("CudaGemmSeconds: no products to time");
  std::vector<PstrainCudaGemm> c(gemms.size());
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmShape& g = gemms[i];
    for (int64_t side : {g.m, g.n, g.k}) {
      if (side < 1 || side > INT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat("CudaGemmSeconds: product ", i,
                                                       " has m=", g.m, " n=", g.n, " k=", g.k,
                                                       ": each must lie in [1, 2^31)"));
      }
    }
    c[i] = PstrainCudaGemm{g.trans_a ? 1 : 0, g.trans_b ? 1 : 0, g.m, g.n, g.k};
  }
  char err[512] = {0};
  double seconds = 0;
  if (pstrain_cuda_gemm_seconds(device, c.data(), static_cast<int>(c.size()), min_seconds, &seconds,
                                err, sizeof(err)) != 0) {
    return absl::UnavailableError(err);
  }
  return seconds;
}

}  // namespace pstrain::model
