// average_pool2d: [H, W, C] -> [H', W', C], each window's mean per channel
// over the cells inside the input (Keras's AveragePooling2D; with "same"
// padding the cells over the edge are not counted). oneDNN computes it
// (model/onednn_layers.h); the reference is model/image_layers.h's.
#include "model/image_layers.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

class AveragePool2DKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kAveragePool2D; }
  const char* name() const override { return "average_pool2d"; }
  const char* keras_class() const override { return "AveragePooling2D"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    return kinds::ParsePoolConfig(e, /*one_d=*/false, layer);
  }
  const char* shape_field() const override { return "pool_size"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, ins[0], 3, "[height, width, channels]"));
    return kinds::WindowOutputShape(spec, ins[0], /*one_d=*/false, ins[0].back());
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
      if (auto layer = CreateOneDnnPoolLayer(a.spec, a.ins[0], a.out, a.max_batch)) return layer;
    }
    return CreateAveragePool2DLayer(a.spec, a.ins[0], a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    std::vector<OnnxAttr> attrs = kinds::OnnxWindowAttrs(spec);
    attrs.push_back(OnnxAttr::Ints("kernel_shape", {spec.window[0], spec.window[1]}));
    attrs.push_back(OnnxAttr::Int("count_include_pad", 0));  // the mean of the cells inside
    return OnnxValue{g.Node("AveragePool", {kinds::OnnxNchw(g, ins[0], xs[0])}, attrs), true};
  }
};

const AveragePool2DKind kAveragePool2D;
PSTRAIN_REGISTER_LAYER_KIND(kAveragePool2D);

}  // namespace
}  // namespace pstrain::model
