// depthwise_conv2d: [H, W, C] -> [H', W', C * depth_multiplier], each
// channel convolved with kernels of its own: depthwise_kernel [kh, kw, C,
// depth_multiplier] (output channel c * depth_multiplier + j), a bias
// [C * multiplier] unless use_bias: false (Keras's DepthwiseConv2D,
// MobileNetV2's). oneDNN computes it (model/onednn_layers.h); the
// reference is model/image_layers.h's direct loops.
#include "absl/strings/str_cat.h"
#include "model/image_layers.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

class DepthwiseConv2DKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kDepthwiseConv2D; }
  const char* name() const override { return "depthwise_conv2d"; }
  const char* keras_class() const override { return "DepthwiseConv2D"; }
  const char* kernel_name() const override { return "depthwise_kernel"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& c = static_cast<const v1::DepthwiseConvLayer&>(e.message());
    PSTRAIN_RETURN_IF_ERROR(kinds::ParseConvConfig(e, c, /*one_d=*/false, layer));
    if (c.has_depth_multiplier() && (c.depth_multiplier() < 1 || c.depth_multiplier() > 256)) {
      return e.Bad("depth_multiplier", absl::StrCat(c.depth_multiplier(), " must be in 1..256"));
    }
    layer->depth_multiplier = c.has_depth_multiplier() ? static_cast<int>(c.depth_multiplier()) : 1;
    if (!c.depthwise_initializer().empty()) layer->kernel_initializer = c.depthwise_initializer();
    return kinds::CheckConfigInitializers(e, *layer, "depthwise_initializer");
  }
  const char* shape_field() const override { return "kernel_size"; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    const Shape& in = ins[0];
    PSTRAIN_RETURN_IF_ERROR(kinds::CheckLayerActivation(spec, /*softmax=*/false));
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, in, 3, "[height, width, channels]"));
    if (spec.depth_multiplier < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " depth_multiplier ", spec.depth_multiplier, " must be at least 1"));
    }
    PSTRAIN_RETURN_IF_ERROR(kinds::CheckKernelSize(
        spec, {spec.window[0], spec.window[1], in.back(), spec.depth_multiplier}));
    return kinds::WindowOutputShape(spec, in, /*one_d=*/false, in[2] * spec.depth_multiplier);
  }

  std::vector<LayerVariable> Variables(const LayerSpec& spec, const Shape& in) const override {
    return kinds::KernelAndBias(spec, "depthwise_kernel",
                                {spec.window[0], spec.window[1], in[2], spec.depth_multiplier},
                                in[2] * spec.depth_multiplier);
  }

  bool folds_padding() const override { return true; }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    const bool folded = a.padding != std::array<int, 4>{0, 0, 0, 0};
    if (CpuKernelsInUse() == CpuKernels::kOneDnn || folded) {
      if (auto layer = CreateOneDnnConvLayer(a.spec, a.ins[0], a.out, a.max_batch, a.kernel_at,
                                             a.bias_at, a.padding)) {
        return layer;
      }
    }
    if (folded) return nullptr;  // the reference takes its input padded
    return CreateDepthwiseConv2DLayer(a.spec, a.ins[0], a.out, a.kernel_at, a.bias_at);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    return kinds::ConvOnnxNode(g, spec, ins[0], xs[0]);
  }
};

const DepthwiseConv2DKind kDepthwiseConv2D;
PSTRAIN_REGISTER_LAYER_KIND(kDepthwiseConv2D);

}  // namespace
}  // namespace pstrain::model
