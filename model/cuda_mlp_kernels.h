// C interface to the CUDA MLP (model/cuda_mlp_kernels.cu), so nvcc compiles
// no Abseil headers. The network is the one model::Network describes: dense
// layers whose kernels ([in, out] row-major) and biases lie where the
// model's ParamLayout puts them (model/param_layout.h), optional ReLU, softmax cross-entropy over
// the last layer. Functions return 0 on success, else a CUDA or cuBLAS error code with a message in
// `err` (NUL-terminated, at most err_len bytes).
#ifndef PSTRAIN_MODEL_CUDA_MLP_KERNELS_H_
#define PSTRAIN_MODEL_CUDA_MLP_KERNELS_H_

#include <cstddef>
#include <cstdint>

extern "C" {

typedef struct PstrainCudaMlp PstrainCudaMlp;

// dims: num_layers + 1 widths (input first); relu[l] != 0 when layer l has
// one. Layer l's kernel and bias lie at kernel_offsets[l] and
// bias_offsets[l] of the flat parameters (num_params floats; the model's
// ParamLayout): the bias must follow the kernel. Allocates device buffers
// for `max_batch` rows and pinned host staging buffers, on device `device`.
int pstrain_cuda_mlp_create(int device, const int* dims, const int* relu, int num_layers,
                            const int64_t* kernel_offsets, const int64_t* bias_offsets,
                            int64_t num_params, int max_batch, PstrainCudaMlp** out, char* err,
                            size_t err_len);

void pstrain_cuda_mlp_destroy(PstrainCudaMlp* mlp);

// One batch (1 <= batch <= max_batch; labels already range-checked):
// forward, and when `grads` is not null, backward into `grads` (the mean
// loss gradient, flat layout) and, when `input_grad` is not null too, the
// mean loss gradient with respect to `x` into it (batch x dims[0]). Adds the batch's summed loss
// and count of correct argmax predictions to *loss_sum and *correct. Copies of each layer's
// parameters to the device overlap the layers computed before it; copies of each layer's gradients
// back overlap the backward pass of the layers below it.
int pstrain_cuda_mlp_run(PstrainCudaMlp* mlp, const float* params, const float* x,
                         const int32_t* labels, int batch, float* grads, float* input_grad,
                         double* loss_sum, int64_t* correct, char* err, size_t err_len);

// Seconds spent in the last run's host<->device copies (by CUDA events on
// the copy stream) and in the whole run, for the share of step time spent
// in copies.
void pstrain_cuda_mlp_last_timing(const PstrainCudaMlp* mlp, double* copy_seconds,
                                  double* total_seconds);
}

#endif  // PSTRAIN_MODEL_CUDA_MLP_KERNELS_H_
