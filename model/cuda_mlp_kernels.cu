// The CUDA MLP behind model/cuda_mlp_kernels.h: cuBLAS sgemm for the dense
// products, our kernels for bias, ReLU, softmax cross-entropy and the bias
// gradient reduction. Two streams: `compute`, and `copy` for host<->device
// transfers from pinned buffers, ordered against each other with events so
// that copies overlap the layers they do not feed.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "model/cuda_layer_math.h"
#include "model/cuda_mlp_kernels.h"
#include "model/cuda_status.h"

struct PstrainCudaMlp {
  int device = 0;
  int layers = 0;
  int max_batch = 0;
  std::vector<int> dims, relu;
  std::vector<int64_t> w_off, b_off;  // per layer, in the flat layout
  int64_t num_params = 0;
  cudaStream_t compute = nullptr, copy = nullptr;
  cublasHandle_t blas = nullptr;
  float *d_params = nullptr, *d_grads = nullptr, *d_loss = nullptr;
  int32_t *d_labels = nullptr, *d_correct = nullptr;
  std::vector<float*> d_act, d_delta;  // [0]: the input batch
  float *h_params = nullptr, *h_grads = nullptr, *h_x = nullptr, *h_loss = nullptr;
  float* h_dx = nullptr;  // the input gradient, when asked for
  int32_t *h_labels = nullptr, *h_correct = nullptr;
  std::vector<cudaEvent_t> param_ready, grad_ready;
  cudaEvent_t input_ready = nullptr, copies_done = nullptr, start = nullptr, end = nullptr;
  // Events around each copy on the copy stream, for timing.
  std::vector<cudaEvent_t> copy_begin, copy_end;
  int copies_used = 0;
  double last_copy_seconds = 0, last_total_seconds = 0;
};

namespace {

__global__ void BiasBroadcastKernel(float* out, const float* bias, int rows, int n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < static_cast<int64_t>(rows) * n) out[i] = bias[i % n];
}

__global__ void ReluKernel(float* v, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) v[i] = fmaxf(v[i], 0.0f);
}

__global__ void ReluMaskKernel(float* d, const float* act, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count && act[i] <= 0.0f) d[i] = 0.0f;
}

// One thread per row: softmax over the row's logits, the row's loss and
// whether its argmax is the label; with `delta`, (p - onehot) * inv_batch.
__global__ void SoftmaxXentKernel(const float* logits, const int32_t* labels, int rows, int classes,
                                  float inv_batch, float* delta, float* loss, int32_t* correct) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  pstrain::cuda_math::SoftmaxCrossEntropyAt(
      logits + static_cast<int64_t>(r) * classes, classes, labels[r], inv_batch, &loss[r],
      &correct[r], delta != nullptr ? delta + static_cast<int64_t>(r) * classes : nullptr);
}

// One thread per column: the bias gradient, delta summed over the rows.
__global__ void BiasGradKernel(const float* delta, int rows, int n, float* out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0;
  for (int r = 0; r < rows; ++r) s += delta[static_cast<int64_t>(r) * n + j];
  out[j] = s;
}

unsigned Blocks(int64_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// An async copy on mlp->copy, bracketed by timing events.
int TimedCopy(PstrainCudaMlp* mlp, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
              char* err, size_t err_len) {
  const int k = mlp->copies_used++;
  PSTRAIN_CUDA_OK(cudaEventRecord(mlp->copy_begin[k], mlp->copy));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(dst, src, bytes, kind, mlp->copy));
  PSTRAIN_CUDA_OK(cudaEventRecord(mlp->copy_end[k], mlp->copy));
  return 0;
}

// Queues the inputs, then each layer's parameters in the order the forward
// pass needs them, on the copy stream; the host stages each into pinned
// memory just before its copy is queued, so staging overlaps the copies
// already queued.
int QueueCopiesIn(PstrainCudaMlp* m, const float* params, const float* x, const int32_t* labels,
                  int batch, char* err, size_t err_len) {
  const size_t xbytes = static_cast<size_t>(batch) * m->dims[0] * sizeof(float);
  std::memcpy(m->h_x, x, xbytes);
  std::memcpy(m->h_labels, labels, batch * sizeof(int32_t));
  if (int rc = TimedCopy(m, m->d_act[0], m->h_x, xbytes, cudaMemcpyHostToDevice, err, err_len)) {
    return rc;
  }
  if (int rc = TimedCopy(m, m->d_labels, m->h_labels, batch * sizeof(int32_t),
                         cudaMemcpyHostToDevice, err, err_len)) {
    return rc;
  }
  PSTRAIN_CUDA_OK(cudaEventRecord(m->input_ready, m->copy));
  for (int l = 0; l < m->layers; ++l) {
    const int64_t first = m->w_off[l];
    const int64_t count = m->b_off[l] + m->dims[l + 1] - first;
    std::memcpy(m->h_params + first, params + first, count * sizeof(float));
    if (int rc = TimedCopy(m, m->d_params + first, m->h_params + first, count * sizeof(float),
                           cudaMemcpyHostToDevice, err, err_len)) {
      return rc;
    }
    PSTRAIN_CUDA_OK(cudaEventRecord(m->param_ready[l], m->copy));
  }
  return 0;
}

constexpr unsigned kThreads = 256;

// Queues the forward pass on the compute stream, each layer after its
// parameters arrive, then the loss (and its delta when `deltas`) and the
// copies of the per-example loss and correctness back to the host.
int QueueForward(PstrainCudaMlp* m, int batch, bool deltas, char* err, size_t err_len) {
  const float one = 1.0f;
  const int L = m->layers;
  PSTRAIN_CUDA_OK(cudaStreamWaitEvent(m->compute, m->input_ready, 0));
  for (int l = 0; l < L; ++l) {
    const int k = m->dims[l], n = m->dims[l + 1];
    PSTRAIN_CUDA_OK(cudaStreamWaitEvent(m->compute, m->param_ready[l], 0));
    float* out = m->d_act[l + 1];
    const float* w = m->d_params + m->w_off[l];
    const float* b = m->d_params + m->b_off[l];
    BiasBroadcastKernel<<<Blocks(static_cast<int64_t>(batch) * n, kThreads), kThreads, 0,
                          m->compute>>>(out, b, batch, n);
    PSTRAIN_CUDA_OK(cudaGetLastError());
    // Row-major out[batch x n] += in[batch x k] * w[k x n], as column-major
    // out^T = w^T * in^T.
    PSTRAIN_BLAS_OK(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, batch, k, &one, w, n,
                                m->d_act[l], k, &one, out, n));
    if (m->relu[l]) {
      const int64_t count = static_cast<int64_t>(batch) * n;
      ReluKernel<<<Blocks(count, kThreads), kThreads, 0, m->compute>>>(out, count);
      PSTRAIN_CUDA_OK(cudaGetLastError());
    }
  }
  const int classes = m->dims[L];
  SoftmaxXentKernel<<<Blocks(batch, 128), 128, 0, m->compute>>>(
      m->d_act[L], m->d_labels, batch, classes, 1.0f / batch, deltas ? m->d_delta[L] : nullptr,
      m->d_loss, m->d_correct);
  PSTRAIN_CUDA_OK(cudaGetLastError());
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(m->h_loss, m->d_loss, batch * sizeof(float),
                                  cudaMemcpyDeviceToHost, m->compute));
  PSTRAIN_CUDA_OK(cudaMemcpyAsync(m->h_correct, m->d_correct, batch * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, m->compute));
  return 0;
}

// Queues layer l's backward pass: its gradients, their copy back to the
// host on the copy stream (while the layers below are still being
// differentiated), and the delta of the layer below (or, for layer 0 with
// `input_grad`, the input's gradient, copied back on the compute stream).
int QueueLayerBackward(PstrainCudaMlp* m, int l, int batch, bool input_grad, char* err,
                       size_t err_len) {
  const float one = 1.0f, zero = 0.0f;
  const int k = m->dims[l], n = m->dims[l + 1];
  const float* in = m->d_act[l];
  const float* d = m->d_delta[l + 1];
  float* gw = m->d_grads + m->w_off[l];
  float* gb = m->d_grads + m->b_off[l];
  // Row-major gw[k x n] = in^T * d, as column-major gw^T = d^T * in.
  PSTRAIN_BLAS_OK(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, n, k, batch, &one, d, n, in, k,
                              &zero, gw, n));
  BiasGradKernel<<<Blocks(n, kThreads), kThreads, 0, m->compute>>>(d, batch, n, gb);
  PSTRAIN_CUDA_OK(cudaGetLastError());
  PSTRAIN_CUDA_OK(cudaEventRecord(m->grad_ready[l], m->compute));
  PSTRAIN_CUDA_OK(cudaStreamWaitEvent(m->copy, m->grad_ready[l], 0));
  const int64_t count = m->b_off[l] + n - m->w_off[l];
  if (int rc = TimedCopy(m, m->h_grads + m->w_off[l], gw, count * sizeof(float),
                         cudaMemcpyDeviceToHost, err, err_len)) {
    return rc;
  }
  if (l > 0) {
    // Row-major din[batch x k] = d * w^T, as column-major din^T = w * d^T.
    const float* w = m->d_params + m->w_off[l];
    float* din = m->d_delta[l];
    PSTRAIN_BLAS_OK(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, batch, n, &one, w, n, d, n,
                                &zero, din, k));
    if (m->relu[l - 1]) {
      const int64_t cnt = static_cast<int64_t>(batch) * k;
      ReluMaskKernel<<<Blocks(cnt, kThreads), kThreads, 0, m->compute>>>(din, m->d_act[l], cnt);
      PSTRAIN_CUDA_OK(cudaGetLastError());
    }
  } else if (input_grad) {
    // The input gradient: row-major dx[batch x k] = d * w^T (the input
    // has no activation of ours), back on the compute stream after the
    // step.
    const float* w = m->d_params + m->w_off[0];
    PSTRAIN_BLAS_OK(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, batch, n, &one, w, n, d, n,
                                &zero, m->d_delta[0], k));
    PSTRAIN_CUDA_OK(cudaMemcpyAsync(m->h_dx, m->d_delta[0],
                                    static_cast<size_t>(batch) * k * sizeof(float),
                                    cudaMemcpyDeviceToHost, m->compute));
  }
  return 0;
}

// Waits for the step; the loss and correct counts added, the gradients
// copied out, the copy and total times recorded.
int FinishRun(PstrainCudaMlp* m, int batch, float* grads, float* input_grad, double* loss_sum,
              int64_t* correct, char* err, size_t err_len) {
  PSTRAIN_CUDA_OK(cudaEventRecord(m->copies_done, m->copy));
  PSTRAIN_CUDA_OK(cudaStreamWaitEvent(m->compute, m->copies_done, 0));
  PSTRAIN_CUDA_OK(cudaEventRecord(m->end, m->compute));
  PSTRAIN_CUDA_OK(cudaEventSynchronize(m->end));
  if (grads != nullptr) std::memcpy(grads, m->h_grads, m->num_params * sizeof(float));
  if (grads != nullptr && input_grad != nullptr) {
    std::memcpy(input_grad, m->h_dx, static_cast<size_t>(batch) * m->dims[0] * sizeof(float));
  }
  double loss = 0;
  int64_t right = 0;
  for (int r = 0; r < batch; ++r) {
    loss += m->h_loss[r];
    right += m->h_correct[r];
  }
  *loss_sum += loss;
  *correct += right;
  float ms = 0;
  double copy_ms = 0;
  for (int k = 0; k < m->copies_used; ++k) {
    PSTRAIN_CUDA_OK(cudaEventElapsedTime(&ms, m->copy_begin[k], m->copy_end[k]));
    copy_ms += ms;
  }
  PSTRAIN_CUDA_OK(cudaEventElapsedTime(&ms, m->start, m->end));
  m->last_copy_seconds = copy_ms / 1e3;
  m->last_total_seconds = ms / 1e3;
  return 0;
}

}  // namespace

extern "C" int pstrain_cuda_mlp_create(int device, const int* dims, const int* relu, int num_layers,
                                       const int64_t* kernel_offsets, const int64_t* bias_offsets,
                                       int64_t num_params, int max_batch, PstrainCudaMlp** out,
                                       char* err, size_t err_len) {
  *out = nullptr;
  if (num_layers < 1 || max_batch < 1) {
    return pstrain::cuda_status::Fail(-1, "pstrain_cuda_mlp_create",
                                      "need at least one layer and max_batch >= 1", err, err_len);
  }
  // Each layer's parameters go to the device in one copy: its bias must
  // follow its kernel, both inside the flat array.
  for (int l = 0; l < num_layers; ++l) {
    const int64_t kernel = static_cast<int64_t>(dims[l]) * dims[l + 1];
    if (kernel_offsets[l] < 0 || bias_offsets[l] != kernel_offsets[l] + kernel ||
        bias_offsets[l] + dims[l + 1] > num_params) {
      return pstrain::cuda_status::Fail(
          -1, "pstrain_cuda_mlp_create",
          "each layer's bias must follow its kernel inside the flat parameters", err, err_len);
    }
  }
  PSTRAIN_CUDA_OK(cudaSetDevice(device));
  PstrainCudaMlp* m = new PstrainCudaMlp;
  *out = m;  // the caller destroys it on error too
  m->device = device;
  m->layers = num_layers;
  m->max_batch = max_batch;
  m->dims.assign(dims, dims + num_layers + 1);
  m->relu.assign(relu, relu + num_layers);
  m->w_off.assign(kernel_offsets, kernel_offsets + num_layers);
  m->b_off.assign(bias_offsets, bias_offsets + num_layers);
  m->num_params = num_params;
  PSTRAIN_CUDA_OK(cudaStreamCreateWithFlags(&m->compute, cudaStreamNonBlocking));
  PSTRAIN_CUDA_OK(cudaStreamCreateWithFlags(&m->copy, cudaStreamNonBlocking));
  PSTRAIN_BLAS_OK(cublasCreate(&m->blas));
  PSTRAIN_BLAS_OK(cublasSetStream(m->blas, m->compute));
  const size_t pbytes = m->num_params * sizeof(float);
  PSTRAIN_CUDA_OK(cudaMalloc(&m->d_params, pbytes));
  PSTRAIN_CUDA_OK(cudaMalloc(&m->d_grads, pbytes));
  PSTRAIN_CUDA_OK(cudaMalloc(&m->d_loss, max_batch * sizeof(float)));
  PSTRAIN_CUDA_OK(cudaMalloc(&m->d_labels, max_batch * sizeof(int32_t)));
  PSTRAIN_CUDA_OK(cudaMalloc(&m->d_correct, max_batch * sizeof(int32_t)));
  m->d_act.assign(num_layers + 1, nullptr);
  m->d_delta.assign(num_layers + 1, nullptr);
  for (int l = 0; l <= num_layers; ++l) {
    const size_t bytes = static_cast<size_t>(max_batch) * m->dims[l] * sizeof(float);
    PSTRAIN_CUDA_OK(cudaMalloc(&m->d_act[l], bytes));
    // d_delta[0]: the input gradient (an embedding bag's backward pass).
    PSTRAIN_CUDA_OK(cudaMalloc(&m->d_delta[l], bytes));
  }
  PSTRAIN_CUDA_OK(cudaMallocHost(&m->h_params, pbytes));
  PSTRAIN_CUDA_OK(cudaMallocHost(&m->h_grads, pbytes));
  PSTRAIN_CUDA_OK(
      cudaMallocHost(&m->h_x, static_cast<size_t>(max_batch) * m->dims[0] * sizeof(float)));
  PSTRAIN_CUDA_OK(
      cudaMallocHost(&m->h_dx, static_cast<size_t>(max_batch) * m->dims[0] * sizeof(float)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&m->h_labels, max_batch * sizeof(int32_t)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&m->h_loss, max_batch * sizeof(float)));
  PSTRAIN_CUDA_OK(cudaMallocHost(&m->h_correct, max_batch * sizeof(int32_t)));
  m->param_ready.assign(num_layers, nullptr);
  m->grad_ready.assign(num_layers, nullptr);
  for (int l = 0; l < num_layers; ++l) {
    PSTRAIN_CUDA_OK(cudaEventCreateWithFlags(&m->param_ready[l], cudaEventDisableTiming));
    PSTRAIN_CUDA_OK(cudaEventCreateWithFlags(&m->grad_ready[l], cudaEventDisableTiming));
  }
  PSTRAIN_CUDA_OK(cudaEventCreateWithFlags(&m->input_ready, cudaEventDisableTiming));
  PSTRAIN_CUDA_OK(cudaEventCreateWithFlags(&m->copies_done, cudaEventDisableTiming));
  PSTRAIN_CUDA_OK(cudaEventCreate(&m->start));
  PSTRAIN_CUDA_OK(cudaEventCreate(&m->end));
  // Copies per run: x, labels, one per layer's parameters, one per layer's
  // gradients.
  const int max_copies = 2 + 2 * num_layers;
  m->copy_begin.assign(max_copies, nullptr);
  m->copy_end.assign(max_copies, nullptr);
  for (int k = 0; k < max_copies; ++k) {
    PSTRAIN_CUDA_OK(cudaEventCreate(&m->copy_begin[k]));
    PSTRAIN_CUDA_OK(cudaEventCreate(&m->copy_end[k]));
  }
  return 0;
}

extern "C" void pstrain_cuda_mlp_destroy(PstrainCudaMlp* m) {
  if (m == nullptr) return;
  cudaSetDevice(m->device);
  if (m->compute != nullptr) cudaStreamSynchronize(m->compute);
  if (m->copy != nullptr) cudaStreamSynchronize(m->copy);
  for (cudaEvent_t e : m->param_ready)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : m->grad_ready)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : m->copy_begin)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : m->copy_end)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : {m->input_ready, m->copies_done, m->start, m->end}) {
    if (e) cudaEventDestroy(e);
  }
  for (float* p : m->d_act) cudaFree(p);
  for (float* p : m->d_delta) cudaFree(p);
  cudaFree(m->d_params);
  cudaFree(m->d_grads);
  cudaFree(m->d_loss);
  cudaFree(m->d_labels);
  cudaFree(m->d_correct);
  cudaFreeHost(m->h_params);
  cudaFreeHost(m->h_grads);
  cudaFreeHost(m->h_x);
  cudaFreeHost(m->h_dx);
  cudaFreeHost(m->h_labels);
  cudaFreeHost(m->h_loss);
  cudaFreeHost(m->h_correct);
  if (m->blas != nullptr) cublasDestroy(m->blas);
  if (m->compute != nullptr) cudaStreamDestroy(m->compute);
  if (m->copy != nullptr) cudaStreamDestroy(m->copy);
  delete m;
}

extern "C" int pstrain_cuda_mlp_run(PstrainCudaMlp* m, const float* params, const float* x,
                                    const int32_t* labels, int batch, float* grads,
                                    float* input_grad, double* loss_sum, int64_t* correct,
                                    char* err, size_t err_len) {
  if (batch < 1 || batch > m->max_batch) {
    return pstrain::cuda_status::Fail(-1, "pstrain_cuda_mlp_run", "batch outside 1..max_batch", err,
                                      err_len);
  }
  PSTRAIN_CUDA_OK(cudaSetDevice(m->device));
  m->copies_used = 0;
  PSTRAIN_CUDA_OK(cudaEventRecord(m->start, m->compute));
  PSTRAIN_CUDA_OK(cudaStreamWaitEvent(m->copy, m->start, 0));
  if (int rc = QueueCopiesIn(m, params, x, labels, batch, err, err_len)) return rc;
  if (int rc = QueueForward(m, batch, grads != nullptr, err, err_len)) return rc;
  if (grads != nullptr) {
    for (int l = m->layers - 1; l >= 0; --l) {
      if (int rc = QueueLayerBackward(m, l, batch, input_grad != nullptr, err, err_len)) return rc;
    }
  }
  return FinishRun(m, batch, grads, input_grad, loss_sum, correct, err, err_len);
}

extern "C" void pstrain_cuda_mlp_last_timing(const PstrainCudaMlp* m, double* copy_seconds,
                                             double* total_seconds) {
  *copy_seconds = m->last_copy_seconds;
  *total_seconds = m->last_total_seconds;
}
