// activation: Keras's Activation layer, any activation but softmax by its
// Keras name (model/activations.h); relu: Keras's ReLU layer, relu or,
// with max_value 6, relu6 (MobileNetV2's). Elementwise, the same shape.
// oneDNN computes them (model/onednn_eltwise.h inside image_layers.h's
// layer) unless the reference kernels are asked for.
#include "absl/strings/str_cat.h"
#include "model/image_layers.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class ActivationKind final : public LayerKindDef {
 public:
  explicit ActivationKind(bool relu) : relu_(relu) {}

  LayerKind kind() const override { return relu_ ? LayerKind::kReLU : LayerKind::kActivation; }
  const char* name() const override { return relu_ ? "relu" : "activation"; }
  const char* keras_class() const override { return relu_ ? "ReLU" : "Activation"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    if (relu_) {
      const auto& r = static_cast<const v1::ReLULayer&>(e.message());
      if (r.has_max_value() && r.max_value() != 6.0f) {
        return e.Bad("max_value", absl::StrCat(r.max_value(),
                                               " is not 6: ReLU layers cap at 6 (relu6) or not "
                                               "at all"));
      }
      layer->activation = r.has_max_value() ? Activation::kRelu6 : Activation::kRelu;
      return absl::OkStatus();
    }
    const v1::Activation a = static_cast<const v1::ActivationLayer&>(e.message()).activation();
    if (a == v1::softmax) return e.Bad("activation", kSoftmaxOnlyLast);
    layer->activation =
        a == v1::ACTIVATION_UNSET ? Activation::kLinear : *ParseActivation(v1::Activation_Name(a));
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    if (spec.activation == Activation::kSoftmax) {
      return absl::InvalidArgumentError(absl::StrCat("activation ", kSoftmaxOnlyLast));
    }
    return ins[0];
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return CreateActivationLayer(a.spec, a.ins[0], a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>&,
                                       const std::vector<OnnxValue>& xs) const override {
    return OnnxValue{g.Activation(spec.activation, xs[0].name), xs[0].nchw};
  }

 private:
  const bool relu_;
};

const ActivationKind kActivation(/*relu=*/false);
const ActivationKind kReLU(/*relu=*/true);
PSTRAIN_REGISTER_LAYER_KIND(kActivation);
PSTRAIN_REGISTER_LAYER_KIND(kReLU);

}  // namespace
}  // namespace pstrain::model
