#include "model/cuda_device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/cuda_device_kernels.h"
#include "model/cuda_plugin.h"

namespace pstrain::model {

bool CudaCompiled() { return pstrain_cuda_compiled() != 0; }

absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices() {
  char err[256] = {0};
  int count = 0;
  if (pstrain_cuda_device_count(&count, err, sizeof(err)) != 0) {
    return absl::UnavailableError(err);
  }
  if (count == 0) return absl::UnavailableError("no CUDA device found");
  std::vector<CudaDeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    CudaDeviceInfo info;
    info.index = i;
    char name[256] = {0};
    if (pstrain_cuda_device_name(i, name, sizeof(name), &info.major, &info.minor, err,
                                 sizeof(err)) != 0) {
      return absl::UnavailableError(err);
    }
    info.name = name;
    out.push_back(info);
  }
  return out;
}

std::string DescribeCuda() {
  if (!CudaPluginLoaded()) return absl::StrCat("cuda: not loaded (", CudaPluginOrigin(), ")");
  if (!CudaCompiled()) return "cuda: not compiled in (CPU-only build)";
  auto devices = ListCudaDevices();
  if (!devices.ok()) {
    return absl::StrCat("cuda: compiled in; no usable device (", devices.status().message(), ")");
  }
  return absl::StrCat("cuda: compiled in; ", devices->size(), " device(s): ",
                      absl::StrJoin(*devices, ", ", [](std::string* out, const CudaDeviceInfo& d) {
                        absl::StrAppend(out, d.index, " ", d.name, " (sm_", d.major, d.minor, ")");
                      }));
}

absl::Status CudaSgdUpdate(absl::Span<float> values, absl::Span<const float> grads, float lr) {
  if (values.size() != grads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaSgdUpdate: ", values.size(), " values but ", grads.size(), " gradients"));
  }
  char err[256] = {0};
  if (pstrain_cuda_sgd_update(values.data(), grads.data(), values.size(), lr, err, sizeof(err)) !=
      0) {
    return absl::UnavailableError(err);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::model
