// flatten: [...] -> [product], the same floats in the same order (Keras's
// Flatten); its output is its input's memory (LayerKindDef::aliases_input).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

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

class FlattenKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kFlatten; }
  const char* name() const override { return "flatten"; }
  const char* keras_class() const override { return "Flatten"; }
  bool aliases_input() const override { return true; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    if (ins[0].size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("flatten has nothing to flatten: its input ", ShapeString(ins[0]),
                       " is already flat (give the model an input_shape, or put flatten after a "
                       "convolution or pooling)"));
    }
    return Shape{ShapeSize(ins[0])};
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<FlattenLayer>(a.spec, a.ins[0], a.out);
  }

  absl::Status DescribeCuda(const LayerSpec&, const Shape&, PstrainCudaLayer* d) const override {
    d->kind = kPstrainCudaFlatten;
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    return OnnxValue{g.Reshape(g.ChannelsLast(xs[0], ins[0]), {-1})};
  }
};

const FlattenKind kFlatten;
PSTRAIN_REGISTER_LAYER_KIND(kFlatten);

}  // namespace
}  // namespace pstrain::model
