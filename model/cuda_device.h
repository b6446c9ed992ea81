// What CUDA this process can use: whether its CUDA plugin (model/cuda_plugin.h)
// loaded and was compiled with nvcc, and which devices the driver reports.
// The first call loads the plugin. Thread-safe.
#ifndef PSTRAIN_MODEL_CUDA_DEVICE_H_
#define PSTRAIN_MODEL_CUDA_DEVICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pstrain::model {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
};

// True when the CUDA plugin loaded and contains CUDA code (false for the
// plugin of a CPU-only build).
bool CudaCompiled();

// The usable devices. Unavailable, with CUDA's own message, when the plugin
// did not load or has no CUDA, there is no driver, or no device; callers
// fall back to the CPU.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

// One line for logs and `pstrain describe`, e.g.
// "cuda: compiled in; no usable device (cudaGetDeviceCount: ...)", or
// "cuda: not loaded (no libpstrain_cuda.so at ...)".
std::string DescribeCuda();

// values[i] -= lr * grads[i] computed on device 0. Unavailable as above;
// InvalidArgument when the sizes differ.
absl::Status CudaSgdUpdate(absl::Span<float> values, absl::Span<const float> grads, float lr);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_CUDA_DEVICE_H_
