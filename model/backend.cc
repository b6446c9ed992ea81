#include "model/backend.h"

#include <cblas.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "model/cuda_device.h"
#include "model/cuda_mlp_kernels.h"

namespace pstrain::model {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::unique_ptr<Network> mlp) : mlp_(std::move(mlp)) {}
  std::string name() const override { return "cpu"; }
  std::string Describe() const override {
    return absl::StrCat("cpu: OpenBLAS sgemm, ", openblas_get_corename(), " kernels");
  }
  const Network& network() const override { return *mlp_; }
  absl::StatusOr<BatchResult> ComputeGradients(const float* params, const float* x,
                                               const int32_t* labels, int batch, float* grads,
                                               const std::function<void(int layer)>& on_layer_done,
                                               float* input_grad) override {
    return mlp_->ComputeGradients(params, x, labels, batch, grads, on_layer_done, input_grad);
  }
  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x, const int32_t* labels,
                                       int64_t n) override {
    return mlp_->Evaluate(params, x, labels, n);
  }
  void SetStepSeed(uint64_t seed) override { mlp_->SetStepSeed(seed); }

 private:
  std::unique_ptr<Network> mlp_;
};

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(std::unique_ptr<Network> mlp,
                                                         int max_batch) {
    auto devices = ListCudaDevices();
    if (!devices.ok()) return devices.status();
    if (mlp->spec().binary()) {
      return absl::UnimplementedError(
          "cuda: the sigmoid loss does not run on the CUDA backend yet (softmax only)");
    }
    for (const LayerSpec& l : mlp->spec().layers) {
      if (l.kind != LayerKind::kDense) {
        return absl::UnimplementedError(
            absl::StrCat("cuda: layer ", l.name, " is ", LayerKindName(l.kind),
                         ", which the CUDA backend does not run yet (dense layers only)"));
      }
    }
    const CudaDeviceInfo& d = devices->front();
    std::vector<int> dims = {mlp->input_width()}, relu;
    for (const LayerSpec& l : mlp->spec().layers) {
      dims.push_back(l.units);
      relu.push_back(l.relu ? 1 : 0);
    }
    const ParamLayout& layout = mlp->layout();
    const std::vector<int64_t> kernel_at = layout.LayerOffsets(ParamRole::kKernel);
    const std::vector<int64_t> bias_at = layout.LayerOffsets(ParamRole::kBias);
    char err[512] = {0};
    PstrainCudaMlp* handle = nullptr;
    if (pstrain_cuda_mlp_create(d.index, dims.data(), relu.data(), static_cast<int>(relu.size()),
                                kernel_at.data(), bias_at.data(), layout.num_parameters(),
                                max_batch, &handle, err, sizeof(err)) != 0) {
      pstrain_cuda_mlp_destroy(handle);
      return absl::UnavailableError(absl::StrCat("cuda: ", err));
    }
    return std::unique_ptr<Backend>(new CudaBackend(
        std::move(mlp), handle, max_batch,
        absl::StrCat("cuda: device ", d.index, " ", d.name, " (sm_", d.major, d.minor, ")")));
  }
  ~CudaBackend() override { pstrain_cuda_mlp_destroy(handle_); }

  std::string name() const override { return "cuda"; }
  std::string Describe() const override { return description_; }
  const Network& network() const override { return *mlp_; }

  absl::StatusOr<BatchResult> ComputeGradients(const float* params, const float* x,
                                               const int32_t* labels, int batch, float* grads,
                                               const std::function<void(int layer)>& on_layer_done,
                                               float* input_grad) override {
    if (batch < 1 || batch > max_batch_) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", batch, " is outside 1..", max_batch_));
    }
    if (absl::Status s = mlp_->CheckLabels(labels, batch); !s.ok()) return s;
    BatchResult r;
    r.count = batch;
    char err[512] = {0};
    if (pstrain_cuda_mlp_run(handle_, params, x, labels, batch, grads, input_grad, &r.loss_sum,
                             &r.correct, err, sizeof(err)) != 0) {
      return absl::InternalError(absl::StrCat("cuda: ", err));
    }
    if (on_layer_done) {
      for (int l = static_cast<int>(mlp_->spec().layers.size()) - 1; l >= 0; --l) {
        on_layer_done(l);
      }
    }
    return r;
  }

  absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x, const int32_t* labels,
                                       int64_t n) override {
    if (absl::Status s = mlp_->CheckLabels(labels, n); !s.ok()) return s;
    BatchResult r;
    char err[512] = {0};
    const int64_t dim = mlp_->input_width();
    for (int64_t start = 0; start < n; start += max_batch_) {
      const int b = static_cast<int>(std::min<int64_t>(max_batch_, n - start));
      if (pstrain_cuda_mlp_run(handle_, params, x + start * dim, labels + start, b, nullptr,
                               nullptr, &r.loss_sum, &r.correct, err, sizeof(err)) != 0) {
        return absl::InternalError(absl::StrCat("cuda: ", err));
      }
      r.count += b;
    }
    return r;
  }

  void LastStepTiming(double* copy_seconds, double* total_seconds) const override {
    pstrain_cuda_mlp_last_timing(handle_, copy_seconds, total_seconds);
  }

 private:
  CudaBackend(std::unique_ptr<Network> mlp, PstrainCudaMlp* handle, int max_batch,
              std::string description)
      : mlp_(std::move(mlp)),
        handle_(handle),
        max_batch_(max_batch),
        description_(std::move(description)) {}

  std::unique_ptr<Network> mlp_;
  PstrainCudaMlp* const handle_;
  const int max_batch_;
  const std::string description_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const NetworkSpec& spec, int max_batch,
                                                       const std::string& device) {
  if (device != "auto" && device != "cpu" && device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", device, "\" is not auto, cpu or cuda"));
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", max_batch, " must be at least 1"));
  }
  if (device != "cpu") {
    auto cuda_mlp = Network::Create(spec, 1);  // layout and label checks only
    if (!cuda_mlp.ok()) return cuda_mlp.status();
    auto cuda = CudaBackend::Create(*std::move(cuda_mlp), max_batch);
    if (cuda.ok() || device == "cuda") return cuda;
    Log("device auto: ",
        cuda.status().code() == absl::StatusCode::kUnimplemented ? "" : "no usable CUDA device: ",
        cuda.status().message(), "; running on the CPU");
  }
  // The CPU's scratch for max_batch rows, only when it computes.
  auto mlp = Network::Create(spec, max_batch);
  if (!mlp.ok()) return mlp.status();
  return std::unique_ptr<Backend>(new CpuBackend(*std::move(mlp)));
}

}  // namespace pstrain::model
