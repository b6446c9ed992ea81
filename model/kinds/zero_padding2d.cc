// zero_padding2d: [H, W, C] -> [H + top + bottom, W + left + right, C],
// zeros around (Keras's ZeroPadding2D; MobileNetV2 pads before its strided
// depthwise convolutions, ResNet-50 before its first convolution and pool).
#include "absl/strings/str_cat.h"
#include "model/image_layers.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class ZeroPadding2DKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kZeroPadding2D; }
  const char* name() const override { return "zero_padding2d"; }
  const char* keras_class() const override { return "ZeroPadding2D"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& p = static_cast<const v1::ZeroPadding2DLayer&>(e.message()).padding();
    for (int64_t v : p) {
      if (v < 0 || v > 65536) return e.Bad("padding", absl::StrCat(v, " must be in 0..65536"));
    }
    auto at = [&p](int i) { return static_cast<int>(p[i]); };
    if (p.size() == 1) {
      layer->padding = {at(0), at(0), at(0), at(0)};
    } else if (p.size() == 2) {
      layer->padding = {at(0), at(0), at(1), at(1)};
    } else if (p.size() == 4) {
      layer->padding = {at(0), at(1), at(2), at(3)};
    } else if (p.empty()) {
      layer->padding = {1, 1, 1, 1};  // Keras's default, (1, 1)
    } else {
      return e.Bad("padding", absl::StrCat("has ", p.size(),
                                           " values: one (every side), two ([rows, columns]) or "
                                           "four ([top, bottom, left, right])"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    const Shape& in = ins[0];
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, in, 3, "[height, width, channels]"));
    for (int p : spec.padding) {
      if (p < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("zero_padding2d padding ", p, " must be at least 0"));
      }
    }
    return Shape{in[0] + spec.padding[0] + spec.padding[1],
                 in[1] + spec.padding[2] + spec.padding[3], in[2]};
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return CreateZeroPadding2DLayer(a.spec, a.ins[0], a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    const int64_t top = spec.padding[0], bottom = spec.padding[1], left = spec.padding[2],
                  right = spec.padding[3];
    const std::vector<int64_t> pads =
        xs[0].nchw ? std::vector<int64_t>{0, 0, top, left, 0, 0, bottom, right}
                   : std::vector<int64_t>{0, top, left, 0, 0, bottom, right, 0};
    return OnnxValue{g.Node("Pad", {xs[0].name, g.Ints(pads)}), xs[0].nchw};
  }
};

const ZeroPadding2DKind kZeroPadding2D;
PSTRAIN_REGISTER_LAYER_KIND(kZeroPadding2D);

}  // namespace
}  // namespace pstrain::model
