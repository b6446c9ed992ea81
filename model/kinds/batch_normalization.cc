// batch_normalization: the same shape, each channel of the last axis
// normalised, scaled and shifted (Keras's BatchNormalization, its defaults:
// momentum 0.99, epsilon 1e-3, center and scale). Training uses the
// batch's statistics and moves the moving ones; inference uses the moving
// ones. The computation and the moving statistics' updates:
// model/batch_norm.h.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/batch_norm.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class BatchNormalizationKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kBatchNormalization; }
  const char* name() const override { return "batch_normalization"; }
  const char* keras_class() const override { return "BatchNormalization"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& b = static_cast<const v1::BatchNormalizationLayer&>(e.message());
    if (b.has_momentum()) {
      if (!(b.momentum() >= 0 && b.momentum() <= 1)) {
        return e.Bad("momentum", absl::StrCat(b.momentum(), " is not in [0, 1]"));
      }
      layer->momentum = b.momentum();
    }
    if (b.has_epsilon()) {
      if (!(b.epsilon() > 0) || !std::isfinite(b.epsilon())) {
        return e.Bad("epsilon", absl::StrCat(b.epsilon(), " must be above 0"));
      }
      layer->epsilon = b.epsilon();
    }
    layer->center = !b.has_center() || b.center();
    layer->scale = !b.has_scale() || b.scale();
    if (b.has_axis() && b.axis() != -1 && b.axis() != static_cast<int64_t>(in.size())) {
      return e.Bad("axis", absl::StrCat(b.axis(), " is not the last axis (-1, or ", in.size(),
                                        " for an input of ", ShapeString(in),
                                        "): batch_normalization normalises the channel axis "
                                        "only"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    if (!(spec.momentum >= 0 && spec.momentum <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_normalization momentum ", spec.momentum, " is not in [0, 1]"));
    }
    if (!(spec.epsilon > 0) || !std::isfinite(spec.epsilon)) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_normalization epsilon ", spec.epsilon, " must be above 0"));
    }
    return ins[0];
  }

  std::vector<LayerVariable> Variables(const LayerSpec& spec, const Shape& in) const override {
    const Shape channels{in.back()};
    std::vector<LayerVariable> out;
    if (spec.scale)
      out.push_back({"gamma", channels, ParamRole::kGamma, LayerVariable::Init::kOnes});
    if (spec.center)
      out.push_back({"beta", channels, ParamRole::kBeta, LayerVariable::Init::kZeros});
    out.push_back({"moving_mean", channels, ParamRole::kMovingMean, LayerVariable::Init::kZeros,
                   /*moving=*/true});
    out.push_back({"moving_variance", channels, ParamRole::kMovingVariance,
                   LayerVariable::Init::kOnes, /*moving=*/true});
    return out;
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return CreateBatchNormLayer(a.spec, a.ins[0], a.max_batch, a.kernel_at);
  }

  // Inference (the moving statistics). ONNX's BatchNormalization takes the
  // channels at axis 1, where NCHW and a flat [N, C] have them; [N, H, W,
  // C] goes to NCHW first and [N, T, C] there and back.
  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    const Shape& shape = ins[0];
    const OnnxValue& x = xs[0];
    const int64_t c = shape.back();
    auto variable = [&](const char* suffix, bool present,
                        float fill) -> absl::StatusOr<std::string> {
      const std::string name = absl::StrCat(spec.name, "/", suffix);
      if (present) return g.VariableTensor(name, {c});
      const std::vector<float> constant(c, fill);
      return g.Floats(name, {c}, constant.data());
    };
    PSTRAIN_ASSIGN_OR_RETURN(const std::string gamma, variable("gamma", spec.scale, 1.0f));
    PSTRAIN_ASSIGN_OR_RETURN(const std::string beta, variable("beta", spec.center, 0.0f));
    PSTRAIN_ASSIGN_OR_RETURN(const std::string mean, variable("moving_mean", true, 0.0f));
    PSTRAIN_ASSIGN_OR_RETURN(const std::string var, variable("moving_variance", true, 0.0f));
    auto normalise = [&](const std::string& in) {
      return g.Node("BatchNormalization", {in, gamma, beta, mean, var},
                    {OnnxAttr::Float("epsilon", spec.epsilon)});
    };
    if (x.nchw || shape.size() == 1) return OnnxValue{normalise(x.name), x.nchw};
    if (shape.size() == 3) return OnnxValue{normalise(g.Transpose(x.name, {0, 3, 1, 2})), true};
    return OnnxValue{g.Transpose(normalise(g.Transpose(x.name, {0, 2, 1})), {0, 2, 1})};
  }
};

const BatchNormalizationKind kBatchNormalization;
PSTRAIN_REGISTER_LAYER_KIND(kBatchNormalization);

}  // namespace
}  // namespace pstrain::model
