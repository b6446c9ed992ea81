// rescaling: out = in * scale + offset, elementwise (Keras's Rescaling:
// 1/255 for pixels in [0, 255], or 1/127.5 and -1 for [-1, 1]).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/image_layers.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class RescalingKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kRescaling; }
  const char* name() const override { return "rescaling"; }
  const char* keras_class() const override { return "Rescaling"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& r = static_cast<const v1::RescalingLayer&>(e.message());
    if (!r.has_scale()) return e.Missing("scale", "");
    if (!std::isfinite(r.scale())) return e.Bad("scale", absl::StrCat(r.scale(), " is not finite"));
    if (!std::isfinite(r.offset())) {
      return e.Bad("offset", absl::StrCat(r.offset(), " is not finite"));
    }
    layer->rescale = r.scale();
    layer->offset = r.offset();
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    if (!std::isfinite(spec.rescale) || !std::isfinite(spec.offset)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rescaling scale ", spec.rescale, " and offset ", spec.offset, " must be finite"));
    }
    return ins[0];
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return CreateRescalingLayer(a.spec, a.ins[0]);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>&,
                                       const std::vector<OnnxValue>& xs) const override {
    // Elementwise, in whichever layout.
    return OnnxValue{
        g.Node("Add", {g.Node("Mul", {xs[0].name, g.Scalar(spec.rescale)}), g.Scalar(spec.offset)}),
        xs[0].nchw};
  }
};

const RescalingKind kRescaling;
PSTRAIN_REGISTER_LAYER_KIND(kRescaling);

}  // namespace
}  // namespace pstrain::model
