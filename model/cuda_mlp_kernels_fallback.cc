// The CPU-only build of model/cuda_mlp_kernels.h: creating a CUDA MLP
// reports that this binary was built without CUDA.
#include <cstdio>

#include "model/cuda_mlp_kernels.h"

extern "C" int pstrain_cuda_mlp_create(int, const int*, const int*, int, const int64_t*,
                                       const int64_t*, int64_t, int, PstrainCudaMlp** out,
                                       char* err, size_t err_len) {
  *out = nullptr;
  std::snprintf(err, err_len,
                "this binary was built without CUDA (no toolkit found at build time)");
  return 35;  // cudaErrorInsufficientDriver: the closest CUDA meaning
}

extern "C" void pstrain_cuda_mlp_destroy(PstrainCudaMlp*) {}

extern "C" int pstrain_cuda_mlp_run(PstrainCudaMlp*, const float*, const float*, const int32_t*,
                                    int, float*, float*, double*, int64_t*, char* err,
                                    size_t err_len) {
  std::snprintf(err, err_len, "this binary was built without CUDA");
  return 35;
}

extern "C" void pstrain_cuda_mlp_last_timing(const PstrainCudaMlp*, double* copy_seconds,
                                             double* total_seconds) {
  *copy_seconds = 0;
  *total_seconds = 0;
}
