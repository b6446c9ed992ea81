// C interface to the CUDA layer stack (model/cuda_net_kernels.cu), so nvcc
// compiles no Abseil headers: every layer of model/layers.h (dense,
// convolutions, max and global average pools, flatten, dropout) and either
// loss, softmax or sigmoid cross-entropy, over host arrays in the flat
// parameter layout of model::Network. Products are cuBLAS sgemm calls (a
// convolution as im2col + sgemm, as on the CPU); everything else is one
// kernel per layer over the arithmetic of model/cuda_layer_math.h, which
// the CPU tests check. An embedding's rows are gathered on the host: the
// stack starts at the dense layers' input and can return its gradient.
//
// Functions return 0 on success, else a CUDA or cuBLAS error code with a
// message in `err` (NUL-terminated, at most err_len bytes).
#ifndef PSTRAIN_MODEL_CUDA_NET_KERNELS_H_
#define PSTRAIN_MODEL_CUDA_NET_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "model/cuda_layer_math.h"

extern "C" {

typedef struct PstrainCudaNet PstrainCudaNet;

enum PstrainCudaLayerKind {
  kPstrainCudaDense = 0,
  kPstrainCudaConv = 1,  // 1D and 2D alike: [h, w, c] windows, h = 1 in 1D
  kPstrainCudaMaxPool = 2,
  kPstrainCudaAveragePool = 3,  // global, over the steps of [t, c]
  kPstrainCudaFlatten = 4,
  kPstrainCudaDropout = 5,
};

typedef struct PstrainCudaLayer {
  int kind;
  int64_t in_size, out_size;   // floats per example
  PstrainWindow window;        // conv and max pool
  int64_t steps, channels;     // average pool: its input's [t, c]
  int units;                   // dense and conv: outputs (per position)
  int relu;                    // dense and conv
  int64_t kernel_at, bias_at;  // dense and conv: in the flat parameters
  uint64_t drop_below;         // dropout: drop when the 32 bits are below
  float keep_scale;            // dropout: 1 / (1 - rate)
} PstrainCudaLayer;

// `layers` in order, the first reading `input_size` floats per example;
// `classes` logits from the last (1 with `sigmoid`). Allocates device
// buffers for `max_batch` examples and pinned host staging on `device`.
int pstrain_cuda_net_create(int device, const PstrainCudaLayer* layers, int num_layers,
                            int64_t input_size, int sigmoid, int classes, int64_t num_params,
                            int max_batch, PstrainCudaNet** out, char* err, size_t err_len);

void pstrain_cuda_net_destroy(PstrainCudaNet* net);

// One batch (1 <= batch <= max_batch; labels already range-checked). With
// `grads`: training (dropout on, each layer's mask from
// cuda_math::LayerSeed(step_seed, layer)), and the mean loss's gradient
// into `grads` (num_params floats), and into `input_grad` (batch x
// input_size) when that is not null too. Without: forward only, dropout
// off. Adds the batch's summed loss and correct predictions to *loss_sum and
// *correct; with the sigmoid loss and `probs` not null, writes each
// example's positive probability to probs[0..batch).
int pstrain_cuda_net_run(PstrainCudaNet* net, const float* params, const float* x,
                         const int32_t* labels, int batch, uint64_t step_seed, float* grads,
                         float* input_grad, double* loss_sum, int64_t* correct, float* probs,
                         char* err, size_t err_len);

// Seconds of the last run spent in host<->device copies and in all.
void pstrain_cuda_net_last_timing(const PstrainCudaNet* net, double* copy_seconds,
                                  double* total_seconds);

// One sgemm call of a step: row-major C[m x n] = op(A)[m x k] op(B)[k x n].
typedef struct PstrainCudaGemm {
  int trans_a, trans_b;
  int64_t m, n, k;
} PstrainCudaGemm;

// The cuBLAS-only time of a training step's products: each call of
// `gemms` on device buffers of its own, in order on one stream, with
// nothing else (no copies, no other kernel) and the handle settings the
// layer stacks use. Three passes over the list warm up, then passes run
// until at least `min_seconds` have passed on the device's clock (CUDA
// events), at least three; *seconds_per_pass is their mean. The bound a
// step that multiplies these shapes cannot beat. REQUIRES: num_gemms >= 1,
// every side in [1, 2^31) (model::CudaGemmSeconds checks both).
int pstrain_cuda_gemm_seconds(int device, const PstrainCudaGemm* gemms, int num_gemms,
                              double min_seconds, double* seconds_per_pass, char* err,
                              size_t err_len);
}

#endif  // PSTRAIN_MODEL_CUDA_NET_KERNELS_H_
