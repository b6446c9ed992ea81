#include <cuda_runtime.h>

#include <cstdio>

#include "model/cuda_device_kernels.h"

namespace {

int Fail(cudaError_t e, const char* what, char* err, size_t err_len) {
  std::snprintf(err, err_len, "%s: %s", what, cudaGetErrorString(e));
  return static_cast<int>(e);
}

__global__ void SgdKernel(float* y, const float* g, size_t n, float lr) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] -= lr * g[i];
}

}  // namespace

extern "C" int pstrain_cuda_compiled() { return 1; }

extern "C" int pstrain_cuda_device_count(int* count, char* err, size_t err_len) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) return Fail(e, "cudaGetDeviceCount", err, err_len);
  return 0;
}

extern "C" int pstrain_cuda_device_name(int index, char* name, size_t name_len,
                                        int* major, int* minor, char* err,
                                        size_t err_len) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) return Fail(e, "cudaGetDeviceProperties", err, err_len);
  std::snprintf(name, name_len, "%s", prop.name);
  *major = prop.major;
  *minor = prop.minor;
  return 0;
}

extern "C" int pstrain_cuda_sgd_update(float* y, const float* g, size_t n,
                                       float lr, char* err, size_t err_len) {
  float *dy = nullptr, *dg = nullptr;
  cudaError_t e = cudaMalloc(&dy, n * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&dg, n * sizeof(float));
  if (e == cudaSuccess) e = cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dg, g, n * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
    SgdKernel<<<blocks, threads>>>(dy, dg, n, lr);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dy);
  cudaFree(dg);
  if (e != cudaSuccess) return Fail(e, "sgd update", err, err_len);
  return 0;
}
