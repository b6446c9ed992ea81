// global_average_pool1d: [T, C] -> [C], the mean over the steps (Keras's
// GlobalAveragePooling1D; the text CNN's).
#include <algorithm>

#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

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

class GlobalAveragePool1DKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kGlobalAveragePool1D; }
  const char* name() const override { return "global_average_pool1d"; }
  const char* keras_class() const override { return "GlobalAveragePooling1D"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, ins[0], 2, "[steps, channels]"));
    return Shape{ins[0][1]};
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<GlobalAveragePool1DLayer>(a.spec, a.ins[0], a.out);
  }

  absl::Status DescribeCuda(const LayerSpec& spec, const Shape& in,
                            PstrainCudaLayer* d) const override {
    d->kind = kPstrainCudaAveragePool;
    d->steps = in[0];
    d->channels = in[1];
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    return OnnxValue{g.Node("ReduceMean", {g.ChannelsLast(xs[0], ins[0])},
                            {OnnxAttr::Ints("axes", {1}), OnnxAttr::Int("keepdims", 0)})};
  }
};

const GlobalAveragePool1DKind kGlobalAveragePool1D;
PSTRAIN_REGISTER_LAYER_KIND(kGlobalAveragePool1D);

}  // namespace
}  // namespace pstrain::model
