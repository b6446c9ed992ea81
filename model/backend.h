// Where a network's forward and backward passes run. One interface, two
// backends: the CPU (OpenBLAS sgemm plus vectorised loops, model/network.h) and
// CUDA (cuBLAS sgemm plus our kernels; pinned host buffers): dense stacks
// with softmax on model/cuda_mlp_kernels.h, whose copy stream overlaps
// compute, every other stack on model/cuda_net_kernels.h. Both take and return host arrays in the flat
// parameter layout of model::Network, so trainers and the PS client do not care
// which one runs. Thread-compatible: one Backend per thread.
#ifndef PSTRAIN_MODEL_BACKEND_H_
#define PSTRAIN_MODEL_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/device.h"
#include "model/network.h"

namespace pstrain::model {

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // One line for logs, e.g. "cuda: device 0 NVIDIA H100 (sm_90)"; on the
  // CPU for --device=auto, why CUDA was not used ("cpu: OpenBLAS sgemm, 1
  // thread, Haswell kernels (device auto: no usable CUDA device: ...)"), so that a
  // task says it once, where it says what it computes on.
  virtual std::string Describe() const = 0;
  // The network: its variables, layout and initial values.
  virtual const Network& network() const = 0;

  // The contracts of Network::ComputeGradients and Network::Evaluate (an embedding
  // bag's rows are combined on the host: the backend sees the dense layers'
  // input and returns its gradient in `input_grad`). On CUDA,
  // `on_layer_done` is called for every layer (last first) once the whole
  // step's gradients are back on the host.
  virtual absl::StatusOr<BatchResult> ComputeGradients(
      const float* params, const float* x, const int32_t* labels, int batch, float* grads,
      const std::function<void(int layer)>& on_layer_done, float* input_grad) = 0;
  absl::StatusOr<BatchResult> ComputeGradients(const float* params, const float* x,
                                               const int32_t* labels, int batch, float* grads) {
    return ComputeGradients(params, x, labels, batch, grads, nullptr, nullptr);
  }
  virtual absl::StatusOr<BatchResult> Evaluate(const float* params, const float* x,
                                               const int32_t* labels, int64_t n) = 0;

  // Dropout masks of the following steps derive from `seed` (the
  // trainer's, per replica and step); both backends draw the same masks.
  virtual void SetStepSeed(uint64_t seed) {}

  // Seconds of the last ComputeGradients spent in host<->device copies, and
  // in all; both 0 on the CPU.
  virtual void LastStepTiming(double* copy_seconds, double* total_seconds) const {
    *copy_seconds = 0;
    *total_seconds = 0;
  }
};

// On `device`: the CPU; CUDA device N (Unavailable, with CUDA's own
// message, when the binary has no CUDA or that device is not usable); auto:
// CUDA device 0 when usable, else the CPU, whose Describe() says why
// (nothing is logged here: commands that score or export a model stay
// quiet about it).
// InvalidArgument for a bad spec (Network::Create) or batch.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const NetworkSpec& spec, int max_batch,
                                                       Device device);

// The cuBLAS-only time of one pass over `gemms` (a step's products,
// Network::StepGemms) on CUDA device `device`: the products alone on device
// buffers, timed by the device for at least `min_seconds`
// (pstrain_cuda_gemm_seconds). The ceiling of a CUDA step at those shapes.
// InvalidArgument for an empty list or a side outside [1, 2^31);
// Unavailable, with CUDA's message, where CUDA is not usable.
absl::StatusOr<double> CudaGemmSeconds(int device, const std::vector<GemmShape>& gemms,
                                       double min_seconds);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_BACKEND_H_
