// max_pool1d: [T, C] -> [T', C]; max_pool2d: [H, W, C] -> [H', W', C]:
// each window's maximum per channel (Keras's MaxPooling1D and 2D; the
// window 2 and the stride the window's unless given). oneDNN computes them
// (model/onednn_layers.h); the reference here keeps each window's argmax
// for its backward pass.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

class MaxPoolLayer final : public Layer {
 public:
  MaxPoolLayer(const LayerSpec& spec, const Shape& in, const Shape& out)
      : Layer(spec, in, out), g_(LayerWindow(spec, in)) {}

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

  const PstrainWindow g_;
  std::vector<int32_t> argmax_;  // per output value: its input's index in the example
};

class MaxPoolKind final : public LayerKindDef {
 public:
  explicit MaxPoolKind(bool one_d) : one_d_(one_d) {}

  LayerKind kind() const override { return one_d_ ? LayerKind::kMaxPool1D : LayerKind::kMaxPool2D; }
  const char* name() const override { return one_d_ ? "max_pool1d" : "max_pool2d"; }
  const char* keras_class() const override { return one_d_ ? "MaxPooling1D" : "MaxPooling2D"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    return kinds::ParsePoolConfig(e, one_d_, layer);
  }
  const char* shape_field() const override { return "pool_size"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    const Shape& in = ins[0];
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(
        spec, in, one_d_ ? 2 : 3, one_d_ ? "[steps, channels]" : "[height, width, channels]"));
    return kinds::WindowOutputShape(spec, in, one_d_, in.back());
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
      if (auto layer = CreateOneDnnPoolLayer(a.spec, a.ins[0], a.out, a.max_batch)) return layer;
    }
    return std::make_unique<MaxPoolLayer>(a.spec, a.ins[0], a.out);
  }

  absl::Status DescribeCuda(const LayerSpec& spec, const Shape& in,
                            PstrainCudaLayer* d) const override {
    d->kind = kPstrainCudaMaxPool;
    d->window = LayerWindow(spec, in);
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    std::vector<OnnxAttr> attrs = kinds::OnnxWindowAttrs(spec);
    attrs.push_back(OnnxAttr::Ints("kernel_shape", {spec.window[0], spec.window[1]}));
    return OnnxValue{g.Node("MaxPool", {kinds::OnnxNchw(g, ins[0], xs[0])}, attrs), true};
  }

 private:
  const bool one_d_;
};

const MaxPoolKind kMaxPool1D(/*one_d=*/true);
const MaxPoolKind kMaxPool2D(/*one_d=*/false);
PSTRAIN_REGISTER_LAYER_KIND(kMaxPool1D);
PSTRAIN_REGISTER_LAYER_KIND(kMaxPool2D);

}  // namespace
}  // namespace pstrain::model
