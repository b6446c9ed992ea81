// A model's layers on the CPU: what a layer is (LayerSpec, the model
// config's form of it), and the Layer each computes with, a forward and a
// backward pass over a batch of row-major tensors in Keras's channels-last
// shapes. Each kind (dense, conv1d, conv2d, depthwise_conv2d, max_pool1d,
// max_pool2d, average_pool2d, global_average_pool1d, global_average_pool2d,
// global_max_pool2d, flatten, dropout, zero_padding2d, activation, relu,
// rescaling, batch_normalization, add, concatenate) is defined once, in a
// file of its own under model/kinds/ (model/layer_kind.h): its shapes,
// variables, CPU and CUDA computation and ONNX form. The functions here
// ask those definitions.
//
// A layer reads the layer before it, or the layers it names (`inputs`, as
// Keras's functional API): then the model is a graph (model/network.h).
// Convolutions, pools, batch normalizations and activation layers run on
// oneDNN (CpuKernels below) or on the reference: convolutions as im2col +
// OpenBLAS sgemm, pools keeping the argmax of each window for their
// backward pass. Padding "valid" or "same" as Keras computes it (same:
// ceil(in / stride) outputs, the odd padding after).
//
// Thread-compatible: a layer owns scratch for its batch, use one per thread.
#ifndef PSTRAIN_MODEL_LAYERS_H_
#define PSTRAIN_MODEL_LAYERS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/activations.h"
#include "model/cuda_layer_math.h"

namespace pstrain::model {

// A tensor's shape per example (the batch dimension is not included).
using Shape = std::vector<int64_t>;
int64_t ShapeSize(const Shape& shape);
// "(None, 26, 26, 32)", as Keras prints an output shape.
std::string KerasShape(const Shape& shape);
// "[26, 26, 32]".
std::string ShapeString(const Shape& shape);

enum class LayerKind {
  kDense,
  kConv1D,
  kConv2D,
  kMaxPool1D,
  kMaxPool2D,
  kGlobalAveragePool1D,
  kFlatten,
  kDropout,
  kAdd,
  kConcatenate,
  kGlobalAveragePool2D,
  kGlobalMaxPool2D,
  kAveragePool2D,
  kZeroPadding2D,
  kActivation,  // Keras's Activation layer
  kReLU,        // Keras's ReLU layer (max_value 6: relu6)
  kDepthwiseConv2D,
  kBatchNormalization,  // model/batch_norm.h
  kRescaling,           // Keras's Rescaling: x * scale + offset
};
// One more than the last LayerKind's value.
inline constexpr int kNumLayerKinds = static_cast<int>(LayerKind::kRescaling) + 1;

// "dense", "conv1d", ... as the model config names them.
const char* LayerKindName(LayerKind kind);

struct LayerSpec {
  LayerKind kind = LayerKind::kDense;
  // Names the layer's variables "<name>/kernel" and "<name>/bias".
  std::string name;
  int units = 0;      // dense: outputs; conv: filters
  bool relu = false;  // dense, conv
  // Dense, conv: the activation after the bias when it is not ReLU (that
  // is `relu`; not both). Activation and ReLU layers: theirs. The last
  // dense layer's may be softmax (sigmoid for a sigmoid loss): the loss
  // then applies it (model/network.h).
  Activation activation = Activation::kLinear;
  // zero_padding2d: rows added at the top and bottom, columns at the left
  // and right.
  std::array<int, 4> padding = {0, 0, 0, 0};
  int depth_multiplier = 1;  // depthwise_conv2d
  // batch_normalization (model/batch_norm.h), Keras's defaults.
  float momentum = 0.99f;
  float epsilon = 1e-3f;
  bool center = true;  // a beta
  bool scale = true;   // a gamma
  // rescaling: out = in * rescale + offset (Keras's scale and offset).
  float rescale = 1.0f;
  float offset = 0.0f;
  // Keras's trainable: false freezes the layer's variables (no optimizer
  // slots, never pushed) and runs a batch normalization in inference.
  bool trainable = true;
  // Dense, conv, depthwise: whether the layer has a bias (Keras's
  // use_bias; a convolution before a batch normalization has none).
  bool use_bias = true;
  // conv: the kernel's [height, width]; pools: the window's. 1D layers use
  // [1, k].
  std::array<int, 2> window = {1, 1};
  // conv and pools: the step between windows ([1, s] in 1D).
  std::array<int, 2> stride = {1, 1};
  bool same_padding = false;  // "same" rather than "valid"
  float rate = 0;             // dropout
  // "glorot_uniform" (Keras's default), "zeros" or "uniform:A".
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";  // "zeros" or "uniform:A"
  // The layers (by name) whose outputs this one reads, in order; "input"
  // names the model's input (after its embeddings, if any). Empty: the
  // layer before it (the model's input for the first).
  std::vector<std::string> inputs;

  // Reads several inputs (add, concatenate): the rest read one
  // (model/layer_kind.h says which of these each kind is).
  bool merges() const;
  // Dense, conv, depthwise: a kernel (and a bias unless !use_bias).
  bool has_kernel() const;
  // "kernel", or Keras's "depthwise_kernel": the kernel variable's name
  // after "<name>/".
  const char* kernel_name() const;
};

// The layer's output shape for input `in`, or InvalidArgument saying what
// does not fit (without the layer's name; the caller adds where): an input
// of the wrong rank for the layer (dense after a [T, C] output, conv2d on
// a flat input...), a kernel or window longer than its input (valid
// padding) or a stride that leaves no output, flatten on an already flat
// input, a dropout rate outside [0, 1), units, filters, window or stride
// below 1.
absl::StatusOr<Shape> LayerOutputShape(const LayerSpec& spec, const Shape& in);
// The same for all of a layer's inputs: a merge takes at least two (add:
// of one shape; concatenate: alike but in the last axis), any other layer
// exactly one.
absl::StatusOr<Shape> LayerOutputShapeForInputs(const LayerSpec& spec,
                                                const std::vector<Shape>& ins);

// The shapes of the layer's variables for input `in` (kernel then bias,
// unless !use_bias; a batch normalization's [C] each, model/batch_norm.h);
// empty for a layer without any. REQUIRES: LayerOutputShape(spec, in) ok.
std::vector<Shape> LayerVariableShapes(const LayerSpec& spec, const Shape& in);

// The window of a convolution or pool over input `in` (model/cuda_layer_math.h):
// its input and output extents, kernel, stride and padding before.
// REQUIRES: LayerOutputShape(spec, in) ok and spec a convolution or pool.
PstrainWindow LayerWindow(const LayerSpec& spec, const Shape& in);

// Glorot's fan-in and fan-out of a layer's kernel, as Keras counts them
// (a convolution's receptive field times its channels).
void KernelFans(const LayerSpec& spec, const Shape& in, int64_t* fan_in, int64_t* fan_out);

// out[r][j] += bias[j] (none when `bias` is null), then the ReLU when
// `relu`, for `rows` rows of n floats: one pass over what sgemm wrote.
void BiasActivation(const float* bias, int64_t rows, int64_t n, bool relu, float* out);

// With `relu`, d_out[r][j] zeroed where out[r][j] (the ReLU's output) is
// 0; and, unless `gb` is null, the bias gradient gb[j] = the sum over the
// `rows` rows of d_out[r][j], in the same pass. Rows of n floats.
void ReluAndBiasGradient(const float* out, int64_t rows, int64_t n, bool relu, float* d_out,
                         float* gb);

// Which code computes the CPU's convolutions (conv1d, conv2d,
// depthwise_conv2d), pools, batch normalizations and activation layers:
// oneDNN's primitives (model/onednn_layers.h, model/batch_norm.h,
// model/onednn_eltwise.h; the default), or the project's own reference
// (im2col + OpenBLAS sgemm, direct loops), which oneDNN's results are
// tested against. PSTRAIN_CPU_KERNELS=reference in the environment picks
// the reference for a process (a benchmark's other side, say); a layer
// oneDNN cannot build falls back to it.
enum class CpuKernels { kOneDnn, kReference };
CpuKernels CpuKernelsInUse();
// For tests and benchmarks: layers created after it use `kernels`.
void SetCpuKernels(CpuKernels kernels);
const char* CpuKernelsName(CpuKernels kernels);  // "onednn", "reference"

// One sgemm call: C[m x n] = op(A)[m x k] * op(B)[k x n].
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
};

// The sgemm calls im2col makes for one forward and backward pass of a
// convolution over window `g` with `filters` outputs (the input's gradient
// when `input_grad`), for `batch` examples: what the reference computes
// and what oneDNN's convolution is measured against.
void AppendConvGemms(const PstrainWindow& g, int64_t filters, int batch, bool input_grad,
                     std::vector<GemmShape>* out);

class Layer {
 public:
  // REQUIRES: LayerOutputShape(spec, in) ok; max_batch >= 1. `kernel_at` and
  // `bias_at` are where its variables lie in the flat parameter array (-1
  // without any; bias_at -1 without a bias); a batch normalization's lie
  // one after another from kernel_at.
  static std::unique_ptr<Layer> Create(const LayerSpec& spec, const Shape& in, int max_batch,
                                       int64_t kernel_at, int64_t bias_at);
  // For a layer of several inputs (add, concatenate; no variables), or one.
  // REQUIRES: LayerOutputShapeForInputs(spec, ins) ok.
  static std::unique_ptr<Layer> CreateForInputs(const LayerSpec& spec,
                                                const std::vector<Shape>& ins, int max_batch,
                                                int64_t kernel_at, int64_t bias_at);
  virtual ~Layer() = default;

  const LayerSpec& spec() const { return spec_; }
  const Shape& in_shape() const { return in_; }
  const Shape& out_shape() const { return out_; }
  int64_t in_size() const { return in_size_; }
  int64_t out_size() const { return out_size_; }

  // `batch` (<= max_batch) examples of in_size() floats -> out_size() each.
  // `training` switches dropout on.
  virtual void Forward(const float* params, const float* in, int batch, bool training,
                       float* out) = 0;

  // After Forward on the same `in` and `batch`, with `out` what it wrote:
  // from d_out (the loss gradient at the output, overwritten as scratch),
  // writes the variables' gradients at their offsets in `grads` and, when
  // `d_in` is not null, the gradient at the input.
  virtual void Backward(const float* params, const float* in, const float* out, float* d_out,
                        int batch, float* grads, float* d_in) = 0;

  // The same over all of the layer's inputs, `ins[i]` and `d_ins[i]` its
  // i-th's (d_ins[i] null: that gradient is not wanted; a merge writes each
  // one, it does not add to it). A layer of one input reads ins[0].
  virtual void ForwardInputs(const float* params, const float* const* ins, int batch,
                             bool training, float* out) {
    Forward(params, ins[0], batch, training, out);
  }
  virtual void BackwardInputs(const float* params, const float* const* ins, const float* out,
                              float* d_out, int batch, float* grads, float* const* d_ins) {
    Backward(params, ins[0], out, d_out, batch, grads, d_ins[0]);
  }

  // The sgemm calls of one forward and backward pass over `batch`
  // examples (with the input gradient when `input_grad`).
  virtual void AppendGemms(int batch, bool input_grad, std::vector<GemmShape>* out) const {}

  // Dropout draws its masks from this seed (the trainer's per replica and
  // step); other layers ignore it.
  virtual void SetSeed(uint64_t seed) {}

  // Whether oneDNN computes the layer (CpuKernels above).
  virtual bool on_onednn() const { return false; }

 protected:
  Layer(const LayerSpec& spec, const Shape& in, const Shape& out);

  const LayerSpec spec_;
  const Shape in_, out_;
  const int64_t in_size_, out_size_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_LAYERS_H_
