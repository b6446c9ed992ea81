// C interface to the CUDA code, so that nvcc compiles no Abseil headers.
// Each function returns 0 on success, otherwise a CUDA error code with a
// message in `err` (NUL-terminated, at most `err_len` bytes).
#ifndef PSTRAIN_MODEL_CUDA_DEVICE_KERNELS_H_
#define PSTRAIN_MODEL_CUDA_DEVICE_KERNELS_H_

#include <cstddef>

extern "C" {

// 1 when this binary was compiled with nvcc, 0 for the CPU-only build.
int pstrain_cuda_compiled();

// Stores the number of usable devices in *count.
int pstrain_cuda_device_count(int* count, char* err, size_t err_len);

// Name and compute capability of device `index`.
int pstrain_cuda_device_name(int index, char* name, size_t name_len, int* major, int* minor,
                             char* err, size_t err_len);

// y[i] -= lr * g[i] for i < n, on device 0 (host buffers in and out): the SGD
// update, used to prove a kernel launches and computes on a real device.
int pstrain_cuda_sgd_update(float* y, const float* g, size_t n, float lr, char* err,
                            size_t err_len);
}

#endif  // PSTRAIN_MODEL_CUDA_DEVICE_KERNELS_H_
