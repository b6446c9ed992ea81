// Error returns shared by the .cu files (nvcc only): a CUDA or cuBLAS call
// that fails makes the enclosing function write "call: reason" into
// `err` (err_len bytes) and return the error's code. The function must
// have `char* err, size_t err_len` in scope and return int.
#ifndef PSTRAIN_MODEL_CUDA_STATUS_H_
#define PSTRAIN_MODEL_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>

namespace pstrain::cuda_status {

// Writes "what: detail" to err; returns `code`, or -1 for a code of 0.
inline int Fail(int code, const char* what, const char* detail, char* err, size_t err_len) {
  std::snprintf(err, err_len, "%s: %s", what, detail);
  return code == 0 ? -1 : code;
}

}  // namespace pstrain::cuda_status

#define PSTRAIN_CUDA_OK(expr)                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (expr);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      return ::pstrain::cuda_status::Fail(static_cast<int>(e_), #expr, cudaGetErrorString(e_), \
                                          err, err_len);                                       \
    }                                                                                          \
  } while (0)

#define PSTRAIN_BLAS_OK(expr)                                                               \
  do {                                                                                      \
    cublasStatus_t s_ = (expr);                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      return ::pstrain::cuda_status::Fail(static_cast<int>(s_), #expr, "cuBLAS error", err, \
                                          err_len);                                         \
    }                                                                                       \
  } while (0)

#endif  // PSTRAIN_MODEL_CUDA_STATUS_H_
