// The CPU-only build of model/cuda_device_kernels.h: every call reports that
// this binary was built without CUDA.
#include <cstdio>

#include "model/cuda_device_kernels.h"

namespace {
int NoCuda(char* err, size_t err_len) {
  std::snprintf(err, err_len,
                "this binary was built without CUDA (no toolkit found at build time)");
  return 35;  // cudaErrorInsufficientDriver: the closest CUDA meaning
}
}  // namespace

extern "C" int pstrain_cuda_compiled() { return 0; }

extern "C" int pstrain_cuda_device_count(int* count, char* err, size_t err_len) {
  *count = 0;
  return NoCuda(err, err_len);
}

extern "C" int pstrain_cuda_device_name(int, char*, size_t, int*, int*, char* err, size_t err_len) {
  return NoCuda(err, err_len);
}

extern "C" int pstrain_cuda_sgd_update(float*, const float*, size_t, float, char* err,
                                       size_t err_len) {
  return NoCuda(err, err_len);
}
