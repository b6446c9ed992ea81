// conv1d: [T, C] -> [T', filters], kernel [k, C, filters]; conv2d:
// [H, W, C] -> [H', W', filters], kernel [kh, kw, C, filters]; a bias
// [filters] unless use_bias: false; ReLU or another activation after it.
// Keras's Conv1D and Conv2D, channels last. oneDNN computes them
// (model/onednn_layers.h); the reference here is im2col + OpenBLAS sgemm,
// the patch matrix built for as many examples at a time as fit 16 MiB.
#include <cblas.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

// The patch matrix of at most this many floats at a time (16 MiB).
constexpr int64_t kPatchFloats = int64_t{1} << 22;

class ConvLayer final : public Layer {
 public:
  ConvLayer(const LayerSpec& spec, const Shape& in, const Shape& out, int max_batch,
            int64_t kernel_at, int64_t bias_at)
      : Layer(spec, in, out),
        g_(LayerWindow(spec, in)),
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

  const PstrainWindow g_;
  const int64_t kernel_at_, bias_at_;
  int64_t patch_ = 0;      // kh * kw * c: one patch row
  int64_t positions_ = 0;  // oh * ow: patch rows per example
  int chunk_ = 1;          // examples per patch matrix
  std::vector<float> cols_, d_cols_;
  const float* cols_of_ = nullptr;  // the input cols_ holds, when whole
  int cols_batch_ = 0;
  ActivationPass activation_;  // one other than ReLU (that is spec_.relu's pass)
};

// The ONNX Conv of a convolution (`groups` > 1: a depthwise one) from `x`
// of `in`: in NCHW, its output left there.
absl::StatusOr<OnnxValue> ConvOnnx(OnnxGraph& g, const LayerSpec& spec, const Shape& in,
                                   const OnnxValue& x, bool depthwise) {
  const int64_t c = in.back();
  const std::string y = kinds::OnnxNchw(g, in, x);
  // Keras's [kh, kw, c_in, c_out] as ONNX's [c_out, c_in, kh, kw]; a
  // depthwise [kh, kw, C, m] as a Conv of C groups, [C * m, 1, kh, kw]
  // (output channel c * m + j is group c's j-th).
  const int64_t kh = spec.window[0], kw = spec.window[1];
  const int64_t cin = depthwise ? 1 : c;
  const int64_t cout = depthwise ? c * spec.depth_multiplier : spec.units;
  const std::string kernel_name = absl::StrCat(spec.name, "/", spec.kernel_name());
  PSTRAIN_ASSIGN_OR_RETURN(const float* kernel, g.Variable(kernel_name, kh * kw * cin * cout));
  std::vector<float> w(kh * kw * cin * cout);
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j)
      for (int64_t ci = 0; ci < cin; ++ci)
        for (int64_t o = 0; o < cout; ++o)
          w[((o * cin + ci) * kh + i) * kw + j] = kernel[((i * kw + j) * cin + ci) * cout + o];
  std::vector<std::string> inputs = {y, g.Floats(kernel_name, {cout, cin, kh, kw}, w.data())};
  if (spec.use_bias) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string bias, g.VariableTensor(spec.name + "/bias", {cout}));
    inputs.push_back(bias);
  }
  std::vector<OnnxAttr> attrs = kinds::OnnxWindowAttrs(spec);
  attrs.push_back(OnnxAttr::Ints("kernel_shape", {kh, kw}));
  if (depthwise) attrs.push_back(OnnxAttr::Int("group", c));
  std::string out = g.Node("Conv", inputs, attrs);
  if (spec.relu) out = g.Node("Relu", {out});
  return OnnxValue{g.Activation(spec.activation, out), true};
}

class ConvKind final : public LayerKindDef {
 public:
  explicit ConvKind(bool one_d) : one_d_(one_d) {}

  LayerKind kind() const override { return one_d_ ? LayerKind::kConv1D : LayerKind::kConv2D; }
  const char* name() const override { return one_d_ ? "conv1d" : "conv2d"; }
  const char* keras_class() const override { return one_d_ ? "Conv1D" : "Conv2D"; }
  const char* kernel_name() const override { return "kernel"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& c = static_cast<const v1::ConvLayer&>(e.message());
    if (c.filters() == 0) return e.Missing("filters", "");
    if (c.filters() < 1 || c.filters() > 65536) {
      return e.Bad("filters", absl::StrCat(c.filters(), " must be in 1..65536"));
    }
    layer->units = static_cast<int>(c.filters());
    PSTRAIN_RETURN_IF_ERROR(kinds::ParseConvConfig(e, c, one_d_, layer));
    if (!c.kernel_initializer().empty()) layer->kernel_initializer = c.kernel_initializer();
    return kinds::CheckConfigInitializers(e, *layer, "kernel_initializer");
  }
  const char* shape_field() const override { return "kernel_size"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    const Shape& in = ins[0];
    PSTRAIN_RETURN_IF_ERROR(kinds::CheckLayerActivation(spec, /*softmax=*/false));
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(
        spec, in, one_d_ ? 2 : 3, one_d_ ? "[steps, channels]" : "[height, width, channels]"));
    if (spec.units < 1) {
      return absl::InvalidArgumentError(absl::StrCat(name(), " has ", spec.units, " filters"));
    }
    PSTRAIN_RETURN_IF_ERROR(
        kinds::CheckKernelSize(spec, {spec.window[0], spec.window[1], in.back(), spec.units}));
    return kinds::WindowOutputShape(spec, in, one_d_, spec.units);
  }

  std::vector<LayerVariable> Variables(const LayerSpec& spec, const Shape& in) const override {
    Shape kernel = one_d_ ? Shape{spec.window[1], in[1], spec.units}
                          : Shape{spec.window[0], spec.window[1], in[2], spec.units};
    return kinds::KernelAndBias(spec, "kernel", std::move(kernel), spec.units);
  }

  bool folds_padding() const override { return !one_d_; }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    const bool folded = a.padding != std::array<int, 4>{0, 0, 0, 0};
    if (CpuKernelsInUse() == CpuKernels::kOneDnn || folded) {
      if (auto layer = CreateOneDnnConvLayer(a.spec, a.ins[0], a.out, a.max_batch, a.kernel_at,
                                             a.bias_at, a.padding)) {
        return layer;
      }
    }
    if (folded) return nullptr;  // the reference takes its input padded
    return std::make_unique<ConvLayer>(a.spec, a.ins[0], a.out, a.max_batch, a.kernel_at,
                                       a.bias_at);
  }

  absl::Status DescribeCuda(const LayerSpec& spec, const Shape& in,
                            PstrainCudaLayer* d) const override {
    PSTRAIN_RETURN_IF_ERROR(kinds::CudaKernelLayer(spec));
    d->kind = kPstrainCudaConv;
    d->units = spec.units;
    d->relu = spec.relu ? 1 : 0;
    d->window = LayerWindow(spec, in);
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    return ConvOnnx(g, spec, ins[0], xs[0], /*depthwise=*/false);
  }

 private:
  const bool one_d_;
};

const ConvKind kConv1D(/*one_d=*/true);
const ConvKind kConv2D(/*one_d=*/false);
PSTRAIN_REGISTER_LAYER_KIND(kConv1D);
PSTRAIN_REGISTER_LAYER_KIND(kConv2D);

}  // namespace

absl::StatusOr<OnnxValue> kinds::ConvOnnxNode(OnnxGraph& g, const LayerSpec& spec, const Shape& in,
                                              const OnnxValue& x) {
  return ConvOnnx(g, spec, in, x, spec.kind == LayerKind::kDepthwiseConv2D);
}

}  // namespace pstrain::model
