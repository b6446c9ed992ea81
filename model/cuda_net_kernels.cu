// The CUDA layer stack behind model/cuda_net_kernels.h. One stream: the
// inputs and parameters go up, the layers run forward and back, the
// gradients come down, all queued before the host waits once. Each kernel
// is one function of model/cuda_layer_math.h per element, one thread each.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "model/cuda_layer_math.h"
#include "model/cuda_net_kernels.h"
#include "model/cuda_status.h"

namespace {

namespace cm = pstrain::cuda_math;

// One layer's description and its device scratch.
struct NetLayer {
  PstrainCudaLayer d;
  int64_t rows_per_example = 1;  // dense: 1; conv: output positions
  float* cols = nullptr;         // conv: the patch matrix of the batch
  float* d_cols = nullptr;       // conv: its gradient
  int32_t* arg = nullptr;        // max pool: each output's argmax
};

}  // namespace

struct PstrainCudaNet {
  int device = 0;
  int max_batch = 0;
  int64_t input_size = 0;
  bool sigmoid = false;
  int classes = 0;
  int64_t num_params = 0;
  std::vector<NetLayer> layers;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  float *d_params = nullptr, *d_grads = nullptr;
  // act[l]: layer l's input (act[0] the batch), act[L] the logits; delta[l]
  // the loss gradient there (delta[0] the input gradient). A flatten's
  // output is its input's buffer; `owned` lists what to free.
  std::vector<float*> act, delta, owned;
  float* d_ones = nullptr;  // bias gradients: column sums as one gemv
  int64_t ones = 0;
  float *d_loss = nullptr, *d_prob = nullptr;
  int32_t *d_labels = nullptr, *d_correct = nullptr;
  float *h_params = nullptr, *h_grads = nullptr, *h_x = nullptr, *h_dx = nullptr;
  float *h_loss = nullptr, *h_prob = nullptr;
  int32_t *h_labels = nullptr, *h_correct = nullptr;
  cudaEvent_t start = nullptr, uploaded = nullptr, computed = nullptr, end = nullptr;
  double last_copy_seconds = 0, last_total_seconds = 0;
};

namespace {

constexpr unsigned kThreads = 256;

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ int64_t Index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }

__global__ void FillKernel(float* v, int64_t count, float value) {
  const int64_t i = Index();
  if (i < count) v[i] = value;
}

__global__ void Im2ColKernel(PstrainWindow g, const float* in, int64_t in_size, int64_t patch,
                             int64_t count, float* cols) {
  const int64_t t = Index();
  if (t < count) cols[t] = cm::Im2ColAt(g, in, in_size, t / patch, t % patch);
}

__global__ void Col2ImKernel(PstrainWindow g, const float* d_cols, int64_t in_size, int64_t count,
                             float* d_in) {
  const int64_t t = Index();
  if (t < count) d_in[t] = cm::Col2ImAt(g, d_cols, in_size, t);
}

__global__ void MaxPoolKernel(PstrainWindow g, const float* in, int64_t in_size, int64_t out_size,
                              int64_t count, float* out, int32_t* arg) {
  const int64_t o = Index();
  if (o < count) cm::MaxPoolAt(g, in, in_size, out_size, o, &out[o], &arg[o]);
}

__global__ void MaxPoolGradKernel(PstrainWindow g, const int32_t* arg, const float* d_out,
                                  int64_t in_size, int64_t out_size, int64_t count, float* d_in) {
  const int64_t t = Index();
  if (t < count) d_in[t] = cm::MaxPoolGradAt(g, arg, d_out, in_size, out_size, t);
}

__global__ void AveragePoolKernel(const float* in, int64_t steps, int64_t c, int64_t count,
                                  float* out) {
  const int64_t o = Index();
  if (o < count) out[o] = cm::AveragePoolAt(in, steps, c, o);
}

__global__ void AveragePoolGradKernel(const float* d_out, int64_t steps, int64_t c, int64_t count,
                                      float* d_in) {
  const int64_t t = Index();
  if (t >= count) return;
  const int64_t e = t / (steps * c), ch = t % c;
  d_in[t] = d_out[e * c + ch] * (1.0f / static_cast<float>(steps));
}

// out = in * the mask's factor (training), or a copy.
__global__ void DropoutKernel(const float* in, int64_t count, bool training, uint64_t seed,
                              uint64_t drop_below, float keep_scale, float* out) {
  const int64_t i = Index();
  if (i >= count) return;
  out[i] = training ? in[i] * cm::DropoutScaleAt(seed, i, drop_below, keep_scale) : in[i];
}

__global__ void BiasReluKernel(float* out, const float* bias, int64_t count, int64_t n, bool relu) {
  const int64_t i = Index();
  if (i >= count) return;
  const float v = out[i] + bias[i % n];
  out[i] = relu ? fmaxf(v, 0.0f) : v;
}

__global__ void ReluMaskKernel(float* d, const float* out, int64_t count) {
  const int64_t i = Index();
  if (i < count) d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}

__global__ void SoftmaxKernel(const float* logits, const int32_t* labels, int rows, int classes,
                              float inv_batch, float* delta, float* loss, int32_t* correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  cm::SoftmaxCrossEntropyAt(logits + static_cast<int64_t>(r) * classes, classes, labels[r],
                            inv_batch, &loss[r], &correct[r],
                            delta != nullptr ? delta + static_cast<int64_t>(r) * classes : nullptr);
}

__global__ void SigmoidKernel(const float* logits, const int32_t* labels, int rows, float inv_batch,
                              float* delta, float* loss, int32_t* correct, float* prob) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  cm::SigmoidCrossEntropyAt(logits[r], labels[r], inv_batch, &loss[r], &correct[r], &prob[r],
                            delta != nullptr ? &delta[r] : nullptr);
}

// Row-major C[m x n] = op(A) op(B) (+ beta C) as cuBLAS's column-major call.
cublasStatus_t Gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const float* a, const float* b, float beta, float* c) {
  const cm::ColumnMajorGemm g = cm::RowMajorAsColumnMajor(ta, tb, m, n, k);
  const float one = 1.0f;
  return cublasSgemm(h, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                     g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.m),
                     static_cast<int>(g.n), static_cast<int>(g.k), &one, b,
                     static_cast<int>(g.ld_first), a, static_cast<int>(g.ld_second), &beta, c,
                     static_cast<int>(g.ldc));
}

// gb[n] = the column sums of row-major d[rows x n]: d seen column-major is
// [n x rows], times a vector of ones.
cublasStatus_t ColumnSums(const PstrainCudaNet* net, const float* d, int64_t rows, int64_t n,
                          float* gb) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgemv(net->blas, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows), &one, d,
                     static_cast<int>(n), net->d_ones, 1, &zero, gb, 1);
}

int Forward(PstrainCudaNet* net, int batch, bool training, uint64_t step_seed, char* err,
            size_t err_len) {
  cudaStream_t s = net->stream;
  for (size_t l = 0; l < net->layers.size(); ++l) {
    NetLayer& layer = net->layers[l];
    const PstrainCudaLayer& d = layer.d;
    const float* in = net->act[l];
    float* out = net->act[l + 1];
    const int64_t out_count = batch * d.out_size;
    switch (d.kind) {
      case kPstrainCudaDense:
      case kPstrainCudaConv: {
        const int64_t rows = batch * layer.rows_per_example;
        const float* lhs = in;
        int64_t k = d.in_size;
        if (d.kind == kPstrainCudaConv) {
          k = cm::PatchSize(d.window);
          Im2ColKernel<<<Blocks(rows * k), kThreads, 0, s>>>(d.window, in, d.in_size, k, rows * k,
                                                             layer.cols);
          PSTRAIN_CUDA_OK(cudaGetLastError());
          lhs = layer.cols;
        }
        PSTRAIN_BLAS_OK(Gemm(net->blas, false, false, rows, d.units, k, lhs,
                             net->d_params + d.kernel_at, 0.0f, out));
        BiasReluKernel<<<Blocks(out_count), kThreads, 0, s>>>(out, net->d_params + d.bias_at,
                                                              out_count, d.units, d.relu != 0);
        break;
      }
      case kPstrainCudaMaxPool:
        MaxPoolKernel<<<Blocks(out_count), kThreads, 0, s>>>(d.window, in, d.in_size, d.out_size,
                                                             out_count, out, layer.arg);
        break;
      case kPstrainCudaAveragePool:
        AveragePoolKernel<<<Blocks(out_count), kThreads, 0, s>>>(in, d.steps, d.channels, out_count,
                                                                 out);
        break;
      case kPstrainCudaFlatten:
        continue;  // act[l + 1] is act[l]
      case kPstrainCudaDropout:
        DropoutKernel<<<Blocks(out_count), kThreads, 0, s>>>(
            in, out_count, training && d.drop_below > 0,
            cm::LayerSeed(step_seed, static_cast<int64_t>(l)), d.drop_below, d.keep_scale, out);
        break;
    }
    PSTRAIN_CUDA_OK(cudaGetLastError());
  }
  return 0;
}

// From delta[L] (the loss gradient at the logits) down to delta[0] when
// `input_grad`; the variables' gradients into d_grads.
int Backward(PstrainCudaNet* net, int batch, bool input_grad, uint64_t step_seed, char* err,
             size_t err_len) {
  cudaStream_t s = net->stream;
  for (int l = static_cast<int>(net->layers.size()) - 1; l >= 0; --l) {
    NetLayer& layer = net->layers[l];
    const PstrainCudaLayer& d = layer.d;
    float* d_out = net->delta[l + 1];
    float* d_in = (l > 0 || input_grad) ? net->delta[l] : nullptr;
    const int64_t in_count = batch * d.in_size, out_count = batch * d.out_size;
    switch (d.kind) {
      case kPstrainCudaDense:
      case kPstrainCudaConv: {
        const int64_t rows = batch * layer.rows_per_example;
        if (d.relu) {
          ReluMaskKernel<<<Blocks(out_count), kThreads, 0, s>>>(d_out, net->act[l + 1], out_count);
          PSTRAIN_CUDA_OK(cudaGetLastError());
        }
        PSTRAIN_BLAS_OK(ColumnSums(net, d_out, rows, d.units, net->d_grads + d.bias_at));
        const bool conv = d.kind == kPstrainCudaConv;
        const int64_t k = conv ? cm::PatchSize(d.window) : d.in_size;
        const float* lhs = conv ? layer.cols : net->act[l];
        // kernel[k x units] = lhs^T d_out
        PSTRAIN_BLAS_OK(Gemm(net->blas, true, false, k, d.units, rows, lhs, d_out, 0.0f,
                             net->d_grads + d.kernel_at));
        if (d_in == nullptr) break;
        const float* kernel = net->d_params + d.kernel_at;
        if (!conv) {
          PSTRAIN_BLAS_OK(
              Gemm(net->blas, false, true, rows, k, d.units, d_out, kernel, 0.0f, d_in));
          break;
        }
        PSTRAIN_BLAS_OK(
            Gemm(net->blas, false, true, rows, k, d.units, d_out, kernel, 0.0f, layer.d_cols));
        Col2ImKernel<<<Blocks(in_count), kThreads, 0, s>>>(d.window, layer.d_cols, d.in_size,
                                                           in_count, d_in);
        break;
      }
      case kPstrainCudaMaxPool:
        if (d_in == nullptr) break;
        MaxPoolGradKernel<<<Blocks(in_count), kThreads, 0, s>>>(
            d.window, layer.arg, d_out, d.in_size, d.out_size, in_count, d_in);
        break;
      case kPstrainCudaAveragePool:
        if (d_in == nullptr) break;
        AveragePoolGradKernel<<<Blocks(in_count), kThreads, 0, s>>>(d_out, d.steps, d.channels,
                                                                    in_count, d_in);
        break;
      case kPstrainCudaFlatten:
        break;  // delta[l + 1] is delta[l]
      case kPstrainCudaDropout:
        if (d_in == nullptr) break;
        // The same factors as the forward pass: the mask is a function of
        // the seed and the element.
        DropoutKernel<<<Blocks(in_count), kThreads, 0, s>>>(
            d_out, in_count, d.drop_below > 0, cm::LayerSeed(step_seed, static_cast<int64_t>(l)),
            d.drop_below, d.keep_scale, d_in);
        break;
    }
    PSTRAIN_CUDA_OK(cudaGetLastError());
  }
  return 0;
}

}  // namespace

extern "C" int pstrain_cuda_net_create(int device, const PstrainCudaLayer* layers, int num_layers,
                                       int64_t input_size, int sigmoid, int classes,
                                       int64_t num_params, int max_batch, PstrainCudaNet** out,
                                       char* err, size_t err_len) {
  *out = nullptr;
  if (num_layers < 1 || max_batch < 1 || input_size < 1 || classes < 1) {
    return pstrain::cuda_status::Fail(-1, "pstrain_cuda_net_create",
                                      "need a layer, an input, a class and max_batch >= 1", err,
                                      err_len);
  }
  if (layers[0].in_size != input_size || layers[num_layers - 1].out_size != classes ||
      (sigmoid != 0 && classes != 1)) {
    return pstrain::cuda_status::Fail(-1, "pstrain_cuda_net_create",
                                      "the layers do not run from the input to the loss's logits",
                                      err, err_len);
  }
  for (int l = 0; l < num_layers; ++l) {
    const PstrainCudaLayer& d = layers[l];
    const bool vars = d.kind == kPstrainCudaDense || d.kind == kPstrainCudaConv;
    if ((l > 0 && d.in_size != layers[l - 1].out_size) ||
        (vars && (d.kernel_at < 0 || d.bias_at < 0 || d.bias_at + d.units > num_params))) {
      return pstrain::cuda_status::Fail(
          -1, "pstrain_cuda_net_create",
          "a layer's input or variables do not fit its neighbours or the parameters", err, err_len);
    }
  }
  PSTRAIN_CUDA_OK(cudaSetDevice(device));
  PstrainCudaNet* n = new PstrainCudaNet;
  *out = n;  // the caller destroys it on error too
  n->device = device;
  n->max_batch = max_batch;
  n->input_size = input_size;
  n->sigmoid = sigmoid != 0;
  n->classes = classes;
  n->num_params = num_params;
  PSTRAIN_CUDA_OK(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
  PSTRAIN_BLAS_OK(cublasCreate(&n->blas));
  PSTRAIN_BLAS_OK(cublasSetStream(n->blas, n->stream));
  const size_t pbytes = static_cast<size_t>(num_params) * sizeof(float);
  PSTRAIN_CUDA_OK(cudaMalloc(&n->d_params, pbytes));
  PSTRAIN_CUDA_OK(cudaMalloc(&n->d_grads, pbytes));
  auto device_floats = [&](int64_t count, float** p) {
    cudaError_t e = cudaMalloc(p, static_cast<size_t>(count) * sizeof(float));
    if (e == cudaSuccess) n->owned.push_back(*p);
    return e;
  };
  n->act.assign(num_layers + 1, nullptr);
  n->delta.assign(num_layers + 1, nullptr);
  PSTRAIN_CUDA_OK(device_floats(max_batch * input_size, &n->act[0]));
  PSTRAIN_CUDA_OK(device_floats(max_batch * input_size, &n->delta[0]));
  int64_t most_rows = max_batch;
  for (int l = 0; l < num_layers; ++l) {
    NetLayer layer;
    layer.d = layers[l];
    const PstrainCudaLayer& d = layer.d;
    if (d.kind == kPstrainCudaFlatten) {
      n->act[l + 1] = n->act[l];
      n->delta[l + 1] = n->delta[l];
    } else {
      PSTRAIN_CUDA_OK(device_floats(max_batch * d.out_size, &n->act[l + 1]));
      PSTRAIN_CUDA_OK(device_floats(max_batch * d.out_size, &n->delta[l + 1]));
    }
    if (d.kind == kPstrainCudaConv) {
      layer.rows_per_example = d.window.oh * d.window.ow;
      const int64_t cols = max_batch * layer.rows_per_example * cm::PatchSize(d.window);
      PSTRAIN_CUDA_OK(device_floats(cols, &layer.cols));
      PSTRAIN_CUDA_OK(device_floats(cols, &layer.d_cols));
    }
    if (d.kind == kPstrainCudaMaxPool) {
      PSTRAIN_CUDA_OK(
          cudaMalloc(&layer.arg, static_cast<size_t>(max_batch) * d.out_size * sizeof(int32_t)));
    }
    most_rows = std::max<int64_t>(most_rows, max_batch * layer.rows_per_example);
    n->layers.push_back(layer);
  }
  n->ones = most_rows;
  PSTRAIN_CUDA_OK(device_floats(most_rows, &n->d_ones));
  FillKernel<<<Blocks(most_rows), kThreads, 0, n->stream>>>(n->d_ones, most_rows, 1.0f);
  PSTRAIN_CUDA_OK(cudaGetLastError());
  PSTRAIN_CUDA_OK(device_floats(max_batch, &n->d_loss));
  PSTRAIN_CUDA_OK(device_floats(max_batch, &n->d_prob));
  PSTRAIN_CUDA_OK(cudaMalloc(&n->d_labels, max_batch * sizeof(int32_t)));
  PSTRAIN_CUDA_OK(cudaMalloc(&n->d_correct, max_batch * sizeof(int32_t)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_params, pbytes));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_grads, pbytes));
  const size_t xbytes = static_cast<size_t>(max_batch) * input_size * sizeof(float);
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_x, xbytes));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_dx, xbytes));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_labels, max_batch * sizeof(int32_t)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_loss, max_batch * sizeof(float)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_prob, max_batch * sizeof(float)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&n->h_correct, max_batch * sizeof(int32_t)));
  for (cudaEvent_t* e : {&n->start, &n->uploaded, &n->computed, &n->end}) {
    PSTRAIN_CUDA_OK(cudaEventCreate(e));
  }
  PSTRAIN_CUDA_OK(cudaStreamSynchronize(n->stream));
  return 0;
}

extern "C" void pstrain_cuda_net_destroy(PstrainCudaNet* n) {
  if (n == nullptr) return;
  cudaSetDevice(n->device);
  if (n->stream != nullptr) cudaStreamSynchronize(n->stream);
  for (cudaEvent_t e : {n->start, n->uploaded, n->computed, n->end}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (float* p : n->owned) cudaFree(p);
  for (NetLayer& l : n->layers) cudaFree(l.arg);
  cudaFree(n->d_params);
  cudaFree(n->d_grads);
  cudaFree(n->d_labels);
  cudaFree(n->d_correct);
  for (void* p :
       {static_cast<void*>(n->h_params), static_cast<void*>(n->h_grads), static_cast<void*>(n->h_x),
        static_cast<void*>(n->h_dx), static_cast<void*>(n->h_labels), static_cast<void*>(n->h_loss),
        static_cast<void*>(n->h_prob), static_cast<void*>(n->h_correct)}) {
    if (p != nullptr) cudaFreeHost(p);
  }
  if (n->blas != nullptr) cublasDestroy(n->blas);
  if (n->stream != nullptr) cudaStreamDestroy(n->stream);
  delete n;
}

extern "C" int pstrain_cuda_net_run(PstrainCudaNet* n, const float* params, const float* x,
                                    const int32_t* labels, int batch, uint64_t step_seed,
                                    float* grads, float* input_grad, double* loss_sum,
                                    int64_t* correct, float* probs, char* err, size_t err_len) {
  if (batch < 1 || batch > n->max_batch) {
    return pstrain::cuda_status::Fail(-1, "pstrain_cuda_net_run", "batch outside 1..max_batch", err,
                                      err_len);
  }
  PSTRAIN_CUDA_OK(cudaSetDevice(n->device));
  cudaStream_t s = n->stream;
  const bool training = grads != nullptr;
  const size_t xbytes = static_cast<size_t>(batch) * n->input_size * sizeof(float);
  const size_t pbytes = static_cast<size_t>(n->num_params) * sizeof(float);
  PSTRAIN_CUDA_OK(cudaEventRecord(n->start, s));
  std::memcpy(n->h_params, params, pbytes);
  std::memcpy(n->h_x, x, xbytes);
  std::memcpy(n->h_labels, labels, batch * sizeof(int32_t));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->d_params, n->h_params, pbytes, cudaMemcpyHostToDevice, s));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->act[0], n->h_x, xbytes, cudaMemcpyHostToDevice, s));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->d_labels, n->h_labels, batch * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, s));
  PSTRAIN_CUDA_OK(cudaEventRecord(n->uploaded, s));
  if (int rc = Forward(n, batch, training, step_seed, err, err_len)) return rc;
  const int L = static_cast<int>(n->layers.size());
  const float inv_batch = 1.0f / static_cast<float>(batch);
  float* d_logits = training ? n->delta[L] : nullptr;
  if (n->sigmoid) {
    SigmoidKernel<<<Blocks(batch), kThreads, 0, s>>>(n->act[L], n->d_labels, batch, inv_batch,
                                                     d_logits, n->d_loss, n->d_correct, n->d_prob);
  } else {
    SoftmaxKernel<<<Blocks(batch), kThreads, 0, s>>>(n->act[L], n->d_labels, batch, n->classes,
                                                     inv_batch, d_logits, n->d_loss, n->d_correct);
  }
  PSTRAIN_CUDA_OK(cudaGetLastError());
  if (training) {
    PSTRAIN_CUDA_OK(cudaMemsetAsync(n->d_grads, 0, pbytes, s));
    if (int rc = Backward(n, batch, input_grad != nullptr, step_seed, err, err_len)) return rc;
  }
  PSTRAIN_CUDA_OK(cudaEventRecord(n->computed, s));
  PSTRAIN_CUDA_OK(
      cudaMemcpyAsync(n->h_loss, n->d_loss, batch * sizeof(float), cudaMemcpyDeviceToHost, s));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->h_correct, n->d_correct, batch * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, s));
  if (n->sigmoid) {
    PSTRAIN_CUDA_OK(
        cudaMemcpyAsync(n->h_prob, n->d_prob, batch * sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  if (training) {
    PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->h_grads, n->d_grads, pbytes, cudaMemcpyDeviceToHost, s));
    if (input_grad != nullptr) {
      PSTRAIN_CUDA_OK(cudaMemcpyAsync(n->h_dx, n->delta[0], xbytes, cudaMemcpyDeviceToHost, s));
    }
  }
  PSTRAIN_CUDA_OK(cudaEventRecord(n->end, s));
  PSTRAIN_CUDA_OK(cudaEventSynchronize(n->end));
  if (training) {
    std::memcpy(grads, n->h_grads, pbytes);
    if (input_grad != nullptr) std::memcpy(input_grad, n->h_dx, xbytes);
  }
  double loss = 0;
  int64_t right = 0;
  for (int r = 0; r < batch; ++r) {
    loss += n->h_loss[r];
    right += n->h_correct[r];
  }
  *loss_sum += loss;
  *correct += right;
  if (n->sigmoid && probs != nullptr) std::memcpy(probs, n->h_prob, batch * sizeof(float));
  float up = 0, down = 0, all = 0;
  PSTRAIN_CUDA_OK(cudaEventElapsedTime(&up, n->start, n->uploaded));
  PSTRAIN_CUDA_OK(cudaEventElapsedTime(&down, n->computed, n->end));
  PSTRAIN_CUDA_OK(cudaEventElapsedTime(&all, n->start, n->end));
  n->last_copy_seconds = (up + down) / 1e3;
  n->last_total_seconds = all / 1e3;
  return 0;
}

extern "C" void pstrain_cuda_net_last_timing(const PstrainCudaNet* n, double* copy_seconds,
                                             double* total_seconds) {
  *copy_seconds = n->last_copy_seconds;
  *total_seconds = n->last_total_seconds;
}

namespace {

// Values in [-1, 1) from each element's index, so the products are of
// ordinary floats (no zeros, denormals or NaN that could take another path).
__global__ void FillKernel(float* p, int64_t count, uint32_t salt) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ salt;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  p[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

// What pstrain_cuda_gemm_seconds allocates, released on every return.
struct GemmScratch {
  std::vector<float*> buffers;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  ~GemmScratch() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (float* b : buffers) cudaFree(b);
    if (start != nullptr) cudaEventDestroy(start);
    if (end != nullptr) cudaEventDestroy(end);
    if (blas != nullptr) cublasDestroy(blas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

}  // namespace

extern "C" int pstrain_cuda_gemm_seconds(int device, const PstrainCudaGemm* gemms, int num_gemms,
                                         double min_seconds, double* seconds_per_pass, char* err,
                                         size_t err_len) {
  *seconds_per_pass = 0;
  PSTRAIN_CUDA_OK(cudaSetDevice(device));
  GemmScratch s;
  PSTRAIN_CUDA_OK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  PSTRAIN_BLAS_OK(cublasCreate(&s.blas));
  PSTRAIN_BLAS_OK(cublasSetStream(s.blas, s.stream));
  PSTRAIN_CUDA_OK(cudaEventCreate(&s.start));
  PSTRAIN_CUDA_OK(cudaEventCreate(&s.end));
  // A, B and C of each call, A and B filled.
  for (int i = 0; i < num_gemms; ++i) {
    const PstrainCudaGemm& g = gemms[i];
    const int64_t counts[3] = {g.m * g.k, g.k * g.n, g.m * g.n};
    for (int j = 0; j < 3; ++j) {
      float* p = nullptr;
      PSTRAIN_CUDA_OK(cudaMalloc(&p, static_cast<size_t>(counts[j]) * sizeof(float)));
      s.buffers.push_back(p);
      if (j < 2) {
        FillKernel<<<Blocks(counts[j]), kThreads, 0, s.stream>>>(p, counts[j],
                                                                 static_cast<uint32_t>(3 * i + j));
        PSTRAIN_CUDA_OK(cudaGetLastError());
      }
    }
  }
  auto pass = [&]() -> cublasStatus_t {
    for (int i = 0; i < num_gemms; ++i) {
      const PstrainCudaGemm& g = gemms[i];
      float* const* abc = &s.buffers[3 * static_cast<size_t>(i)];
      const cublasStatus_t st =
          Gemm(s.blas, g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, abc[0], abc[1], 0.0f, abc[2]);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  for (int w = 0; w < 3; ++w) PSTRAIN_BLAS_OK(pass());
  PSTRAIN_CUDA_OK(cudaStreamSynchronize(s.stream));
  // Batches of passes between two events, doubling until the time is long
  // enough to read, then repeated until `min_seconds` in all.
  int64_t passes = 0;
  double seconds = 0;
  int64_t batch = 1;
  while (passes < 3 || seconds < min_seconds) {
    PSTRAIN_CUDA_OK(cudaEventRecord(s.start, s.stream));
    for (int64_t b = 0; b < batch; ++b) PSTRAIN_BLAS_OK(pass());
    PSTRAIN_CUDA_OK(cudaEventRecord(s.end, s.stream));
    PSTRAIN_CUDA_OK(cudaEventSynchronize(s.end));
    float ms = 0;
    PSTRAIN_CUDA_OK(cudaEventElapsedTime(&ms, s.start, s.end));
    passes += batch;
    seconds += ms / 1e3;
    if (ms < 20 && batch < (int64_t{1} << 20)) batch *= 2;
  }
  *seconds_per_pass = seconds / static_cast<double>(passes);
  return 0;
}
