#include "model/layers.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/splitmix64.h"
#include "model/batch_norm.h"
#include "model/image_layers.h"
#include "model/onednn_layers.h"

namespace pstrain::model {

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string KerasShape(const Shape& shape) {
  return absl::StrCat("(None, ", absl::StrJoin(shape, ", "), ")");
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "dense";
    case LayerKind::kConv1D:
      return "conv1d";
    case LayerKind::kConv2D:
      return "conv2d";
    case LayerKind::kMaxPool1D:
      return "max_pool1d";
    case LayerKind::kMaxPool2D:
      return "max_pool2d";
    case LayerKind::kGlobalAveragePool1D:
      return "global_average_pool1d";
    case LayerKind::kFlatten:
      return "flatten";
    case LayerKind::kDropout:
      return "dropout";
    case LayerKind::kAdd:
      return "add";
    case LayerKind::kConcatenate:
      return "concatenate";
    case LayerKind::kGlobalAveragePool2D:
      return "global_average_pool2d";
    case LayerKind::kGlobalMaxPool2D:
      return "global_max_pool2d";
    case LayerKind::kAveragePool2D:
      return "average_pool2d";
    case LayerKind::kZeroPadding2D:
      return "zero_padding2d";
    case LayerKind::kActivation:
      return "activation";
    case LayerKind::kReLU:
      return "relu";
    case LayerKind::kDepthwiseConv2D:
      return "depthwise_conv2d";
    case LayerKind::kBatchNormalization:
      return "batch_normalization";
    case LayerKind::kRescaling:
      return "rescaling";
  }
  return "?";
}

namespace {

// The layers with a kernel over windows: conv1d, conv2d, depthwise_conv2d.
bool IsConv(LayerKind k) {
  return k == LayerKind::kConv1D || k == LayerKind::kConv2D || k == LayerKind::kDepthwiseConv2D;
}
bool Is1D(LayerKind k) { return k == LayerKind::kConv1D || k == LayerKind::kMaxPool1D; }

// Outputs along one axis of `in` steps for a window of `k` moved by `s`.
int64_t OutLength(int64_t in, int k, int s, bool same) {
  if (same) return (in + s - 1) / s;
  return in < k ? 0 : (in - k) / s + 1;
}

// Keras's "same": the padding before the first step (the odd one goes after).
int64_t PadBefore(int64_t in, int k, int s, bool same) {
  if (!same) return 0;
  const int64_t out = OutLength(in, k, s, true);
  return std::max<int64_t>((out - 1) * s + k - in, 0) / 2;
}

// A convolution's or pool's input seen as [h, w, c] (1D: h = 1) and its
// output's [oh, ow].
struct Geometry {
  int64_t h = 1, w = 1, c = 1, oh = 1, ow = 1;
  int kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pad_top = 0, pad_left = 0;

  Geometry(const LayerSpec& spec, const Shape& in) {
    if (Is1D(spec.kind)) {
      w = in[0];
      c = in[1];
    } else {
      h = in[0];
      w = in[1];
      c = in[2];
    }
    kh = spec.window[0];
    kw = spec.window[1];
    sh = spec.stride[0];
    sw = spec.stride[1];
    oh = OutLength(h, kh, sh, spec.same_padding);
    ow = OutLength(w, kw, sw, spec.same_padding);
    pad_top = PadBefore(h, kh, sh, spec.same_padding);
    pad_left = PadBefore(w, kw, sw, spec.same_padding);
  }
};

}  // namespace

PstrainWindow LayerWindow(const LayerSpec& spec, const Shape& in) {
  const Geometry g(spec, in);
  return PstrainWindow{g.h, g.w, g.c, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pad_top, g.pad_left};
}

void AppendConvGemms(const PstrainWindow& g, int64_t filters, int batch, bool input_grad,
                     std::vector<GemmShape>* out) {
  const int64_t rows = batch * g.oh * g.ow;
  const int64_t patch = int64_t{g.kh} * g.kw * g.c;
  out->push_back({false, false, rows, filters, patch});
  out->push_back({true, false, patch, filters, rows});
  if (input_grad) out->push_back({false, true, rows, patch, filters});
}

namespace {

std::string WindowString(const LayerSpec& spec) {
  return Is1D(spec.kind) ? absl::StrCat(spec.window[1])
                         : absl::StrCat(spec.window[0], "x", spec.window[1]);
}

absl::Status NeedRank(const LayerSpec& spec, const Shape& in, size_t rank, const char* form) {
  if (in.size() == rank) return absl::OkStatus();
  std::string hint;
  if (spec.kind == LayerKind::kDense || spec.kind == LayerKind::kGlobalAveragePool1D) {
    hint = spec.kind == LayerKind::kDense ? ": put flatten or global_average_pool1d before it" : "";
  } else if (in.size() == 1) {
    hint = ": give the model an input_shape (e.g. input_shape: [28, 28, 1])";
  }
  return absl::InvalidArgumentError(absl::StrCat(LayerKindName(spec.kind), " needs a ", form,
                                                 " input but its input is ", ShapeString(in),
                                                 hint));
}

}  // namespace

namespace {

// Kernels are held whole in each worker's flat parameter array.
constexpr double kMaxKernelValues = 2147483648.0;  // 2^31

absl::Status CheckKernelSize(const LayerSpec& spec, const Shape& in) {
  double values = 1;
  Shape kernel;
  if (spec.kind == LayerKind::kDense) {
    kernel = {in[0], spec.units};
  } else if (spec.kind == LayerKind::kDepthwiseConv2D) {
    kernel = {spec.window[0], spec.window[1], in.back(), spec.depth_multiplier};
  } else {
    kernel = {spec.window[0], spec.window[1], in.back(), spec.units};
  }
  for (int64_t d : kernel) values *= static_cast<double>(d);
  if (values <= kMaxKernelValues) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(LayerKindName(spec.kind), " kernel of ", values, " values is larger than 2^31"));
}

}  // namespace

absl::StatusOr<Shape> LayerOutputShape(const LayerSpec& spec, const Shape& in) {
  const char* kind = LayerKindName(spec.kind);
  switch (spec.kind) {
    case LayerKind::kDense:
      if (absl::Status s = NeedRank(spec, in, 1, "flat [N]"); !s.ok()) return s;
      if (spec.relu && spec.activation != Activation::kLinear) {
        return absl::InvalidArgumentError(
            absl::StrCat("dense has both relu and ", ActivationName(spec.activation)));
      }
      if (spec.units < 1) {
        return absl::InvalidArgumentError(absl::StrCat("dense has ", spec.units, " units"));
      }
      if (absl::Status s = CheckKernelSize(spec, in); !s.ok()) return s;
      return Shape{spec.units};
    case LayerKind::kFlatten:
      if (in.size() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("flatten has nothing to flatten: its input ", ShapeString(in),
                         " is already flat (give the model an input_shape, or put flatten after a "
                         "convolution or pooling)"));
      }
      return Shape{ShapeSize(in)};
    case LayerKind::kDropout:
      if (!(spec.rate >= 0 && spec.rate < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("dropout rate ", spec.rate, " is not in [0, 1)"));
      }
      return in;
    case LayerKind::kGlobalAveragePool1D:
      if (absl::Status s = NeedRank(spec, in, 2, "[steps, channels]"); !s.ok()) return s;
      return Shape{in[1]};
    case LayerKind::kAdd:
    case LayerKind::kConcatenate:
      return LayerOutputShapeForInputs(spec, std::vector<Shape>{in});
    case LayerKind::kGlobalAveragePool2D:
    case LayerKind::kGlobalMaxPool2D:
      if (absl::Status s = NeedRank(spec, in, 3, "[height, width, channels]"); !s.ok()) return s;
      return Shape{in[2]};
    case LayerKind::kZeroPadding2D: {
      if (absl::Status s = NeedRank(spec, in, 3, "[height, width, channels]"); !s.ok()) return s;
      for (int p : spec.padding) {
        if (p < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("zero_padding2d padding ", p, " must be at least 0"));
        }
      }
      return Shape{in[0] + spec.padding[0] + spec.padding[1],
                   in[1] + spec.padding[2] + spec.padding[3], in[2]};
    }
    case LayerKind::kActivation:
    case LayerKind::kReLU:
      if (spec.activation == Activation::kSoftmax) {
        return absl::InvalidArgumentError(absl::StrCat("activation ", kSoftmaxOnlyLast));
      }
      return in;
    case LayerKind::kRescaling:
      if (!std::isfinite(spec.rescale) || !std::isfinite(spec.offset)) {
        return absl::InvalidArgumentError(absl::StrCat("rescaling scale ", spec.rescale,
                                                       " and offset ", spec.offset,
                                                       " must be finite"));
      }
      return in;
    case LayerKind::kBatchNormalization:
      if (!(spec.momentum >= 0 && spec.momentum <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch_normalization momentum ", spec.momentum, " is not in [0, 1]"));
      }
      if (!(spec.epsilon > 0) || !std::isfinite(spec.epsilon)) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch_normalization epsilon ", spec.epsilon, " must be above 0"));
      }
      return in;
    default:
      break;
  }
  if (IsConv(spec.kind) && spec.relu && spec.activation != Activation::kLinear) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " has both relu and ",
                                                   ActivationName(spec.activation)));
  }
  if (IsConv(spec.kind) && spec.activation == Activation::kSoftmax) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " activation ", kSoftmaxOnlyLast));
  }
  const bool one_d = Is1D(spec.kind);
  if (absl::Status s = NeedRank(spec, in, one_d ? 2 : 3,
                                one_d ? "[steps, channels]" : "[height, width, channels]");
      !s.ok()) {
    return s;
  }
  if (spec.kind == LayerKind::kDepthwiseConv2D) {
    if (spec.depth_multiplier < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " depth_multiplier ", spec.depth_multiplier, " must be at least 1"));
    }
  } else if (IsConv(spec.kind) && spec.units < 1) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " has ", spec.units, " filters"));
  }
  const char* what = IsConv(spec.kind) ? "kernel" : "pool";
  for (int a = one_d ? 1 : 0; a < 2; ++a) {
    if (spec.window[a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " ", what, " size ", spec.window[a], " must be at least 1"));
    }
    if (spec.stride[a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " stride ", spec.stride[a], " must be at least 1"));
    }
  }
  if (IsConv(spec.kind)) {
    if (absl::Status s = CheckKernelSize(spec, in); !s.ok()) return s;
  }
  const Geometry g(spec, in);
  if (g.oh < 1 || g.ow < 1) {
    const std::string length = one_d ? absl::StrCat("a length of ", in[0])
                                     : absl::StrCat("an input of ", in[0], "x", in[1]);
    return absl::InvalidArgumentError(
        IsConv(spec.kind) ? absl::StrCat(kind, " kernel ", WindowString(spec), " is longer than ",
                                         length, " (valid padding): nothing is left to convolve")
                          : absl::StrCat(kind, " pool ", WindowString(spec),
                                         " leaves zero length from ", length, " (valid padding)"));
  }
  const int64_t channels = spec.kind == LayerKind::kDepthwiseConv2D ? g.c * spec.depth_multiplier
                           : IsConv(spec.kind)                        ? spec.units
                                                                      : g.c;
  if (one_d) return Shape{g.ow, channels};
  return Shape{g.oh, g.ow, channels};
}

absl::StatusOr<Shape> LayerOutputShapeForInputs(const LayerSpec& spec,
                                                const std::vector<Shape>& ins) {
  const char* kind = LayerKindName(spec.kind);
  if (!spec.merges()) {
    if (ins.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " reads one input, not ", ins.size()));
    }
    return LayerOutputShape(spec, ins[0]);
  }
  if (ins.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind, " needs at least two inputs (name them in inputs), not ", ins.size()));
  }
  Shape out = ins[0];
  for (size_t i = 1; i < ins.size(); ++i) {
    const Shape& in = ins[i];
    if (spec.kind == LayerKind::kAdd) {
      if (in != ins[0]) {
        return absl::InvalidArgumentError(absl::StrCat("add needs inputs of one shape, but input ",
                                                       i, " is ", ShapeString(in),
                                                       " and input 0 ", ShapeString(ins[0])));
      }
      continue;
    }
    const bool alike = in.size() == out.size() &&
                       std::equal(in.begin(), in.end() - 1, ins[0].begin());
    if (!alike) {
      return absl::InvalidArgumentError(absl::StrCat(
          "concatenate joins inputs along their last axis, which must be alike in the others, "
          "but input ", i, " is ", ShapeString(in), " and input 0 ", ShapeString(ins[0])));
    }
    out.back() += in.back();
  }
  return out;
}

std::vector<Shape> LayerVariableShapes(const LayerSpec& spec, const Shape& in) {
  std::vector<Shape> out;
  switch (spec.kind) {
    case LayerKind::kDense:
      out = {{in[0], spec.units}, {spec.units}};
      break;
    case LayerKind::kConv1D:
      out = {{spec.window[1], in[1], spec.units}, {spec.units}};
      break;
    case LayerKind::kConv2D:
      out = {{spec.window[0], spec.window[1], in[2], spec.units}, {spec.units}};
      break;
    case LayerKind::kDepthwiseConv2D:
      out = {{spec.window[0], spec.window[1], in[2], spec.depth_multiplier},
             {in[2] * spec.depth_multiplier}};
      break;
    case LayerKind::kBatchNormalization:
      // gamma, beta, moving_mean, moving_variance (model/batch_norm.h).
      out.assign((spec.scale ? 1 : 0) + (spec.center ? 1 : 0) + 2, Shape{in.back()});
      return out;
    default:
      return {};
  }
  if (!spec.use_bias) out.pop_back();
  return out;
}

void KernelFans(const LayerSpec& spec, const Shape& in, int64_t* fan_in, int64_t* fan_out) {
  const std::vector<Shape> shapes = spec.has_kernel() ? LayerVariableShapes(spec, in)
                                                      : std::vector<Shape>();
  if (shapes.empty()) {
    *fan_in = *fan_out = 0;
    return;
  }
  const Shape& k = shapes[0];
  // [..., in_channels, out_channels]: the receptive field is the rest.
  const int64_t field = ShapeSize(k) / (k[k.size() - 2] * k.back());
  *fan_in = field * k[k.size() - 2];
  *fan_out = field * k.back();
}

namespace {

std::atomic<int>& CpuKernelsSetting() {
  static std::atomic<int> setting{[] {
    const char* env = std::getenv("PSTRAIN_CPU_KERNELS");
    const std::string_view given = env == nullptr ? "onednn" : env;
    if (given == "reference") return static_cast<int>(CpuKernels::kReference);
    if (given != "onednn") {
      std::fprintf(stderr,
                   "PSTRAIN_CPU_KERNELS=%s is neither onednn nor reference: oneDNN computes\n",
                   env);
    }
    return static_cast<int>(CpuKernels::kOneDnn);
  }()};
  return setting;
}

}  // namespace

CpuKernels CpuKernelsInUse() { return static_cast<CpuKernels>(CpuKernelsSetting().load()); }
void SetCpuKernels(CpuKernels kernels) { CpuKernelsSetting().store(static_cast<int>(kernels)); }
const char* CpuKernelsName(CpuKernels kernels) {
  return kernels == CpuKernels::kOneDnn ? "onednn" : "reference";
}

Layer::Layer(const LayerSpec& spec, const Shape& in, const Shape& out)
    : spec_(spec), in_(in), out_(out), in_size_(ShapeSize(in)), out_size_(ShapeSize(out)) {}

namespace {

// out[r] += bias, then the ReLU when `relu`, for `rows` rows of n: one pass
// over the product sgemm wrote.
void BiasActivation(const float* __restrict bias, int64_t rows, int64_t n, bool relu,
                    float* __restrict out) {
  if (bias == nullptr) {  // no bias (use_bias: false): the ReLU alone
    if (relu) {
      for (int64_t i = 0; i < rows * n; ++i) out[i] = std::max(out[i], 0.0f);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict o = out + r * n;
    if (relu) {
      for (int64_t j = 0; j < n; ++j) o[j] = std::max(o[j] + bias[j], 0.0f);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j] += bias[j];
    }
  }
}

}  // namespace

void ReluAndBiasGradient(const float* __restrict out, int64_t rows, int64_t n, bool relu,
                         float* __restrict d_out, float* __restrict gb) {
  if (gb == nullptr) {  // no bias: the ReLU's mask alone
    if (relu) {
      for (int64_t i = 0; i < rows * n; ++i) d_out[i] = out[i] > 0.0f ? d_out[i] : 0.0f;
    }
    return;
  }
  std::fill(gb, gb + n, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict d = d_out + r * n;
    if (relu) {
      const float* __restrict o = out + r * n;
      for (int64_t j = 0; j < n; ++j) d[j] = o[j] > 0.0f ? d[j] : 0.0f;
    }
    for (int64_t j = 0; j < n; ++j) gb[j] += d[j];
  }
}

namespace {

class DenseLayer final : public Layer {
 public:
  DenseLayer(const LayerSpec& spec, const Shape& in, const Shape& out, int64_t kernel_at,
             int64_t bias_at)
      : Layer(spec, in, out),
        kernel_at_(kernel_at),
        bias_at_(bias_at),
        activation_(spec.activation) {}

  void Forward(const float* params, const float* in, int batch, bool, float* out) override {
    const int64_t k = in_size_, n = out_size_;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, n, k, 1.0f, in, k,
                params + kernel_at_, n, 0.0f, out, n);
    BiasActivation(bias_at_ < 0 ? nullptr : params + bias_at_, batch, n, spec_.relu, out);
    activation_.Forward(batch * n, out);
  }

  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    const int64_t k = in_size_, n = out_size_;
    activation_.Backward(batch * n, out, d_out);
    ReluAndBiasGradient(out, batch, n, spec_.relu, d_out,
                        bias_at_ < 0 ? nullptr : grads + bias_at_);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, batch, 1.0f, in, k, d_out, n, 0.0f,
                grads + kernel_at_, n);
    if (d_in != nullptr) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, k, n, 1.0f, d_out, n,
                  params + kernel_at_, n, 0.0f, d_in, k);
    }
  }

  void AppendGemms(int batch, bool input_grad, std::vector<GemmShape>* out) const override {
    out->push_back({false, false, batch, out_size_, in_size_});
    out->push_back({true, false, in_size_, out_size_, batch});
    if (input_grad) out->push_back({false, true, batch, in_size_, out_size_});
  }

 private:
  const int64_t kernel_at_, bias_at_;
  ActivationPass activation_;  // one other than ReLU (that is spec_.relu's pass)
};

// The patch matrix of at most this many floats at a time (16 MiB).
constexpr int64_t kPatchFloats = int64_t{1} << 22;

class ConvLayer final : public Layer {
 public:
  ConvLayer(const LayerSpec& spec, const Shape& in, const Shape& out, int max_batch,
            int64_t kernel_at, int64_t bias_at)
      : Layer(spec, in, out),
        g_(spec, in),
        kernel_at_(kernel_at),
        bias_at_(bias_at),
        activation_(spec.activation) {
    patch_ = static_cast<int64_t>(g_.kh) * g_.kw * g_.c;
    positions_ = g_.oh * g_.ow;
    chunk_ = static_cast<int>(std::clamp<int64_t>(
        kPatchFloats / std::max<int64_t>(1, positions_ * patch_), 1, max_batch));
  }

  void Forward(const float* params, const float* in, int batch, bool, float* out) override {
    const int64_t f = spec_.units;
    EnsurePatches(false);
    for (int start = 0; start < batch; start += chunk_) {
      const int n = std::min(chunk_, batch - start);
      Im2Col(in + start * in_size_, n, cols_.data());
      const int64_t rows = n * positions_;
      float* o = out + start * out_size_;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, f, patch_, 1.0f, cols_.data(),
                  patch_, params + kernel_at_, f, 0.0f, o, f);
      BiasActivation(bias_at_ < 0 ? nullptr : params + bias_at_, rows, f, spec_.relu, o);
    }
    activation_.Forward(batch * out_size_, out);
    // One chunk: the patches are still those of this batch for Backward.
    cols_of_ = batch <= chunk_ ? in : nullptr;
    cols_batch_ = batch;
  }

  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    const int64_t f = spec_.units;
    activation_.Backward(batch * out_size_, out, d_out);
    ReluAndBiasGradient(out, batch * positions_, f, spec_.relu, d_out,
                        bias_at_ < 0 ? nullptr : grads + bias_at_);
    EnsurePatches(d_in != nullptr);
    const bool cached = cols_of_ == in && cols_batch_ == batch && batch <= chunk_;
    for (int start = 0; start < batch; start += chunk_) {
      const int n = std::min(chunk_, batch - start);
      if (!cached) Im2Col(in + start * in_size_, n, cols_.data());
      const int64_t rows = n * positions_;
      const float* d = d_out + start * out_size_;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch_, f, rows, 1.0f, cols_.data(),
                  patch_, d, f, start == 0 ? 0.0f : 1.0f, grads + kernel_at_, f);
      if (d_in != nullptr) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, patch_, f, 1.0f, d, f,
                    params + kernel_at_, f, 0.0f, d_cols_.data(), patch_);
        float* di = d_in + start * in_size_;
        std::fill(di, di + n * in_size_, 0.0f);
        Col2Im(d_cols_.data(), n, di);
      }
    }
    cols_of_ = nullptr;
  }

  void AppendGemms(int batch, bool input_grad, std::vector<GemmShape>* out) const override {
    AppendConvGemms(LayerWindow(spec_, in_), spec_.units, batch, input_grad, out);
  }

 private:
  void EnsurePatches(bool with_grad) {
    const size_t n = static_cast<size_t>(chunk_) * positions_ * patch_;
    if (cols_.size() < n) cols_.resize(n);
    if (with_grad && d_cols_.size() < n) d_cols_.resize(n);
  }

  // Rows of `patch_` floats, one per output position of `n` examples: the
  // input under the kernel there, zeros where it hangs over the padding.
  void Im2Col(const float* in, int n, float* cols) const {
    const int64_t c = g_.c, run = g_.kw * c;
    for (int e = 0; e < n; ++e) {
      const float* x = in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          float* row = cols + ((e * g_.oh + oy) * g_.ow + ox) * patch_;
          const int64_t x0 = ox * g_.sw - g_.pad_left;
          const int64_t j0 = std::max<int64_t>(0, -x0);
          const int64_t j1 = std::min<int64_t>(g_.kw, g_.w - x0);
          for (int i = 0; i < g_.kh; ++i) {
            float* dst = row + i * run;
            const int64_t y = oy * g_.sh - g_.pad_top + i;
            if (y < 0 || y >= g_.h || j1 <= j0) {
              std::fill(dst, dst + run, 0.0f);
              continue;
            }
            std::fill(dst, dst + j0 * c, 0.0f);
            // Runs of a few floats (3 for a 3-wide kernel on one channel):
            // a loop, not a call.
            const float* __restrict src = x + (y * g_.w + x0 + j0) * c;
            float* __restrict to = dst + j0 * c;
            const int64_t len = (j1 - j0) * c;
            for (int64_t t = 0; t < len; ++t) to[t] = src[t];
            std::fill(dst + j1 * c, dst + run, 0.0f);
          }
        }
      }
    }
  }

  // The reverse of Im2Col: each patch row's values added back where they
  // came from.
  void Col2Im(const float* cols, int n, float* d_in) const {
    const int64_t c = g_.c, run = g_.kw * c;
    for (int e = 0; e < n; ++e) {
      float* x = d_in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const float* row = cols + ((e * g_.oh + oy) * g_.ow + ox) * patch_;
          const int64_t x0 = ox * g_.sw - g_.pad_left;
          const int64_t j0 = std::max<int64_t>(0, -x0);
          const int64_t j1 = std::min<int64_t>(g_.kw, g_.w - x0);
          for (int i = 0; i < g_.kh; ++i) {
            const int64_t y = oy * g_.sh - g_.pad_top + i;
            if (y < 0 || y >= g_.h || j1 <= j0) continue;
            const float* src = row + i * run + j0 * c;
            float* dst = x + (y * g_.w + x0 + j0) * c;
            const int64_t len = (j1 - j0) * c;
            for (int64_t t = 0; t < len; ++t) dst[t] += src[t];
          }
        }
      }
    }
  }

  const Geometry g_;
  const int64_t kernel_at_, bias_at_;
  int64_t patch_ = 0;      // kh * kw * c: one patch row
  int64_t positions_ = 0;  // oh * ow: patch rows per example
  int chunk_ = 1;          // examples per patch matrix
  std::vector<float> cols_, d_cols_;
  const float* cols_of_ = nullptr;  // the input cols_ holds, when whole
  int cols_batch_ = 0;
  ActivationPass activation_;  // one other than ReLU (that is spec_.relu's pass)
};

class MaxPoolLayer final : public Layer {
 public:
  MaxPoolLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out), g_(spec, in) {}

  void Forward(const float*, const float* in, int batch, bool training, float* out) override {
    const int64_t c = g_.c;
    if (training && argmax_.size() < static_cast<size_t>(batch * out_size_)) {
      argmax_.resize(batch * out_size_);
    }
    for (int e = 0; e < batch; ++e) {
      const float* x = in + e * in_size_;
      for (int64_t oy = 0; oy < g_.oh; ++oy) {
        for (int64_t ox = 0; ox < g_.ow; ++ox) {
          const int64_t at = e * out_size_ + (oy * g_.ow + ox) * c;
          float* o = out + at;
          int32_t* arg = training ? argmax_.data() + at : nullptr;
          bool first = true;
          for (int i = 0; i < g_.kh; ++i) {
            const int64_t y = oy * g_.sh - g_.pad_top + i;
            if (y < 0 || y >= g_.h) continue;
            for (int j = 0; j < g_.kw; ++j) {
              const int64_t xx = ox * g_.sw - g_.pad_left + j;
              if (xx < 0 || xx >= g_.w) continue;
              const int32_t base = static_cast<int32_t>((y * g_.w + xx) * c);
              if (first) {
                Take(x + base, base, c, o, arg);
                first = false;
              } else if (arg != nullptr) {
                MaxWithArg(x + base, base, c, o, arg);
              } else {
                Max(x + base, c, o);
              }
            }
          }
        }
      }
    }
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    std::fill(d_in, d_in + batch * in_size_, 0.0f);
    for (int e = 0; e < batch; ++e) {
      const int32_t* arg = argmax_.data() + e * out_size_;
      const float* d = d_out + e * out_size_;
      float* di = d_in + e * in_size_;
      for (int64_t i = 0; i < out_size_; ++i) di[arg[i]] += d[i];
    }
  }

 private:
  // The window's first position, then the rest folded in; channels are
  // contiguous, so each is one vectorised pass.
  static void Take(const float* __restrict v, int32_t base, int64_t c, float* __restrict o,
                   int32_t* __restrict arg) {
    for (int64_t ch = 0; ch < c; ++ch) o[ch] = v[ch];
    if (arg == nullptr) return;
    for (int64_t ch = 0; ch < c; ++ch) arg[ch] = base + static_cast<int32_t>(ch);
  }
  static void MaxWithArg(const float* __restrict v, int32_t base, int64_t c, float* __restrict o,
                         int32_t* __restrict arg) {
    const int32_t n = static_cast<int32_t>(c);
    for (int32_t ch = 0; ch < n; ++ch) {
      const float a = v[ch], b = o[ch];
      // All ones where this value is greater (ties keep the first, as
      // argmax does): a mask rather than a branch, so the loop vectorises.
      const int32_t more = -static_cast<int32_t>(a > b);
      o[ch] = std::max(b, a);
      arg[ch] = (arg[ch] & ~more) | ((base + ch) & more);
    }
  }
  static void Max(const float* __restrict v, int64_t c, float* __restrict o) {
    for (int64_t ch = 0; ch < c; ++ch) o[ch] = std::max(o[ch], v[ch]);
  }

  const Geometry g_;
  std::vector<int32_t> argmax_;  // per output value: its input's index in the example
};

class GlobalAveragePool1DLayer final : public Layer {
 public:
  GlobalAveragePool1DLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out) {}

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    const int64_t t = in_[0], c = in_[1];
    const float inv = 1.0f / static_cast<float>(t);
    for (int e = 0; e < batch; ++e) {
      float* o = out + e * c;
      std::fill(o, o + c, 0.0f);
      const float* x = in + e * in_size_;
      for (int64_t s = 0; s < t; ++s) {
        for (int64_t ch = 0; ch < c; ++ch) o[ch] += x[s * c + ch];
      }
      for (int64_t ch = 0; ch < c; ++ch) o[ch] *= inv;
    }
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t t = in_[0], c = in_[1];
    const float inv = 1.0f / static_cast<float>(t);
    for (int e = 0; e < batch; ++e) {
      const float* d = d_out + e * c;
      float* di = d_in + e * in_size_;
      for (int64_t s = 0; s < t; ++s) {
        for (int64_t ch = 0; ch < c; ++ch) di[s * c + ch] = d[ch] * inv;
      }
    }
  }
};

class FlattenLayer final : public Layer {
 public:
  FlattenLayer(const LayerSpec& spec, const Shape& in, const Shape& out) : Layer(spec, in, out) {}

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    std::memcpy(out, in, batch * in_size_ * sizeof(float));
  }
  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in != nullptr) std::memcpy(d_in, d_out, batch * in_size_ * sizeof(float));
  }
};

class DropoutLayer final : public Layer {
 public:
  DropoutLayer(const LayerSpec& spec, const Shape& in, const Shape& out) : Layer(spec, in, out) {}

  void SetSeed(uint64_t seed) override { seed_ = seed; }

  void Forward(const float*, const float* in, int batch, bool training, float* out) override {
    const int64_t n = batch * in_size_;
    if (!training || spec_.rate == 0) {
      std::memcpy(out, in, n * sizeof(float));
      scale_.clear();
      return;
    }
    if (scale_.size() < static_cast<size_t>(n)) scale_.resize(n);
    // Keep a value when a uniform 32-bit draw is at least rate * 2^32.
    const uint64_t drop_below =
        static_cast<uint64_t>(static_cast<double>(spec_.rate) * 4294967296.0);
    const float keep_scale = 1.0f / (1.0f - spec_.rate);
    uint64_t state = seed_;
    for (int64_t i = 0; i < n; i += 2) {
      const uint64_t r = pstrain::SplitMix64(&state);
      scale_[i] = (r & 0xFFFFFFFFull) >= drop_below ? keep_scale : 0.0f;
      if (i + 1 < n) scale_[i + 1] = (r >> 32) >= drop_below ? keep_scale : 0.0f;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale_[i];
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in == nullptr) return;
    const int64_t n = batch * in_size_;
    if (scale_.empty()) {
      std::memcpy(d_in, d_out, n * sizeof(float));
      return;
    }
    for (int64_t i = 0; i < n; ++i) d_in[i] = d_out[i] * scale_[i];
  }

 private:
  uint64_t seed_ = 0;
  std::vector<float> scale_;  // the last training pass's: 0 or 1 / (1 - rate)
};

// The sum of its inputs; its gradient goes to each of them as it is.
class AddLayer final : public Layer {
 public:
  AddLayer(const LayerSpec& spec, const std::vector<Shape>& ins, const Shape& out)
      : Layer(spec, ins[0], out), inputs_(static_cast<int>(ins.size())) {}

  void Forward(const float* params, const float* in, int batch, bool training,
               float* out) override {
    ForwardInputs(params, &in, batch, training, out);
  }
  void ForwardInputs(const float*, const float* const* ins, int batch, bool,
                     float* __restrict out) override {
    const int64_t n = batch * out_size_;
    const float* __restrict a = ins[0];
    const float* __restrict b = ins[1];
    for (int64_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
    for (int i = 2; i < inputs_; ++i) {
      const float* __restrict c = ins[i];
      for (int64_t j = 0; j < n; ++j) out[j] += c[j];
    }
  }
  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    BackwardInputs(params, &in, out, d_out, batch, grads, &d_in);
  }
  void BackwardInputs(const float*, const float* const*, const float*, float* d_out, int batch,
                      float*, float* const* d_ins) override {
    for (int i = 0; i < inputs_; ++i) {
      if (d_ins[i] != nullptr) std::memcpy(d_ins[i], d_out, batch * out_size_ * sizeof(float));
    }
  }

 private:
  const int inputs_;
};

// Its inputs' rows side by side along the last axis: each example's output
// is runs of `width` (the last axis) from each input in turn.
class ConcatenateLayer final : public Layer {
 public:
  ConcatenateLayer(const LayerSpec& spec, const std::vector<Shape>& ins, const Shape& out)
      : Layer(spec, ins[0], out), runs_(ShapeSize(out) / out.back()) {
    for (const Shape& in : ins) widths_.push_back(in.back());
  }

  void Forward(const float* params, const float* in, int batch, bool training,
               float* out) override {
    ForwardInputs(params, &in, batch, training, out);
  }
  void ForwardInputs(const float*, const float* const* ins, int batch, bool,
                     float* out) override {
    const int64_t c = out_shape().back();
    int64_t at = 0;
    for (size_t i = 0; i < widths_.size(); ++i) {
      const int64_t w = widths_[i];
      const float* in = ins[i];
      for (int64_t r = 0; r < batch * runs_; ++r) {
        std::memcpy(out + r * c + at, in + r * w, w * sizeof(float));
      }
      at += w;
    }
  }
  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    BackwardInputs(params, &in, out, d_out, batch, grads, &d_in);
  }
  void BackwardInputs(const float*, const float* const*, const float*, float* d_out, int batch,
                      float*, float* const* d_ins) override {
    const int64_t c = out_shape().back();
    int64_t at = 0;
    for (size_t i = 0; i < widths_.size(); ++i) {
      const int64_t w = widths_[i];
      if (float* d = d_ins[i]; d != nullptr) {
        for (int64_t r = 0; r < batch * runs_; ++r) {
          std::memcpy(d + r * w, d_out + r * c + at, w * sizeof(float));
        }
      }
      at += w;
    }
  }

 private:
  const int64_t runs_;  // positions per example before the last axis
  std::vector<int64_t> widths_;
};

}  // namespace

std::unique_ptr<Layer> Layer::CreateForInputs(const LayerSpec& spec, const std::vector<Shape>& ins,
                                              int max_batch, int64_t kernel_at, int64_t bias_at) {
  const Shape out = *LayerOutputShapeForInputs(spec, ins);
  switch (spec.kind) {
    case LayerKind::kAdd:
      return std::make_unique<AddLayer>(spec, ins, out);
    case LayerKind::kConcatenate:
      return std::make_unique<ConcatenateLayer>(spec, ins, out);
    default:
      return Create(spec, ins[0], max_batch, kernel_at, bias_at);
  }
}

std::unique_ptr<Layer> Layer::Create(const LayerSpec& spec, const Shape& in, int max_batch,
                                     int64_t kernel_at, int64_t bias_at) {
  if (spec.merges()) {
    return CreateForInputs(spec, std::vector<Shape>{in}, max_batch, kernel_at, bias_at);
  }
  const Shape out = *LayerOutputShape(spec, in);
  switch (spec.kind) {
    case LayerKind::kDense:
      return std::make_unique<DenseLayer>(spec, in, out, kernel_at, bias_at);
    case LayerKind::kConv1D:
    case LayerKind::kConv2D:
      if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
        if (auto layer = CreateOneDnnConvLayer(spec, in, out, max_batch, kernel_at, bias_at)) {
          return layer;
        }
      }
      return std::make_unique<ConvLayer>(spec, in, out, max_batch, kernel_at, bias_at);
    case LayerKind::kMaxPool1D:
    case LayerKind::kMaxPool2D:
      if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
        if (auto layer = CreateOneDnnPoolLayer(spec, in, out, max_batch)) return layer;
      }
      return std::make_unique<MaxPoolLayer>(spec, in, out);
    case LayerKind::kGlobalAveragePool1D:
      return std::make_unique<GlobalAveragePool1DLayer>(spec, in, out);
    case LayerKind::kFlatten:
      return std::make_unique<FlattenLayer>(spec, in, out);
    case LayerKind::kDropout:
      return std::make_unique<DropoutLayer>(spec, in, out);
    case LayerKind::kGlobalAveragePool2D:
    case LayerKind::kGlobalMaxPool2D:
      if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
        if (auto layer = CreateOneDnnPoolLayer(spec, in, out, max_batch)) return layer;
      }
      return CreateGlobalPool2DLayer(spec, in, out);
    case LayerKind::kAveragePool2D:
      if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
        if (auto layer = CreateOneDnnPoolLayer(spec, in, out, max_batch)) return layer;
      }
      return CreateAveragePool2DLayer(spec, in, out);
    case LayerKind::kZeroPadding2D:
      return CreateZeroPadding2DLayer(spec, in, out);
    case LayerKind::kActivation:
    case LayerKind::kReLU:
      return CreateActivationLayer(spec, in, out);
    case LayerKind::kDepthwiseConv2D:
      if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
        if (auto layer = CreateOneDnnConvLayer(spec, in, out, max_batch, kernel_at, bias_at)) {
          return layer;
        }
      }
      return CreateDepthwiseConv2DLayer(spec, in, out, kernel_at, bias_at);
    case LayerKind::kBatchNormalization:
      return CreateBatchNormLayer(spec, in, max_batch, kernel_at);
    case LayerKind::kRescaling:
      return CreateRescalingLayer(spec, in);
    case LayerKind::kAdd:
    case LayerKind::kConcatenate:
      break;  // above
  }
  return nullptr;
}

}  // namespace pstrain::model
