// dropout: the same shape; in training each value is zeroed with
// probability `rate` and the rest scaled by 1 / (1 - rate) (inverted
// dropout, Keras's Dropout), the mask drawn from the step's seed; else the
// identity.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/splitmix64.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

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

class DropoutKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kDropout; }
  const char* name() const override { return "dropout"; }
  const char* keras_class() const override { return "Dropout"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    layer->rate = static_cast<const v1::DropoutLayer&>(e.message()).rate();
    return absl::OkStatus();
  }
  const char* shape_field() const override { return "rate"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    if (!(spec.rate >= 0 && spec.rate < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dropout rate ", spec.rate, " is not in [0, 1)"));
    }
    return ins[0];
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<DropoutLayer>(a.spec, a.ins[0], a.out);
  }

  absl::Status DescribeCuda(const LayerSpec& spec, const Shape&,
                            PstrainCudaLayer* d) const override {
    d->kind = kPstrainCudaDropout;
    // As the CPU's dropout: drop when a draw's 32 bits are below this.
    d->drop_below = static_cast<uint64_t>(static_cast<double>(spec.rate) * 4294967296.0);
    d->keep_scale = 1.0f / (1.0f - spec.rate);
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph&, const LayerSpec&, const std::vector<Shape>&,
                                       const std::vector<OnnxValue>& xs) const override {
    return xs[0];  // inference: the identity, in whichever layout
  }
};

const DropoutKind kDropout;
PSTRAIN_REGISTER_LAYER_KIND(kDropout);

}  // namespace
}  // namespace pstrain::model
