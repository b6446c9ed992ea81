// The CPU-only build of model/cuda_net_kernels.h: creating a CUDA layer
// stack reports that this binary was built without CUDA.
#include <cstdio>

#include "model/cuda_net_kernels.h"

extern "C" int pstrain_cuda_net_create(int, const PstrainCudaLayer*, int, int64_t, int, int,
                                       int64_t, int, PstrainCudaNet** out, char* err,
                                       size_t err_len) {
  *out = nullptr;
  std::snprintf(err, err_len,
                "this binary was built without CUDA (no toolkit found at build time)");
  return 35;  // cudaErrorInsufficientDriver: the closest CUDA meaning
}

extern "C" void pstrain_cuda_net_destroy(PstrainCudaNet*) {}

extern "C" int pstrain_cuda_net_run(PstrainCudaNet*, const float*, const float*, const int32_t*,
                                    int, uint64_t, float*, float*, double*, int64_t*, float*,
                                    char* err, size_t err_len) {
  std::snprintf(err, err_len, "this binary was built without CUDA");
  return 35;
}

extern "C" void pstrain_cuda_net_last_timing(const PstrainCudaNet*, double* copy_seconds,
                                             double* total_seconds) {
  *copy_seconds = 0;
  *total_seconds = 0;
}

extern "C" int pstrain_cuda_gemm_seconds(int, const PstrainCudaGemm*, int, double,
                                         double* seconds_per_pass, char* err, size_t err_len) {
  *seconds_per_pass = 0;
  std::snprintf(err, err_len, "this binary was built without CUDA");
  return 35;
}
