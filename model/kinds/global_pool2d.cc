// global_average_pool2d and global_max_pool2d: [H, W, C] -> [C], the mean
// or the maximum over the positions (Keras's GlobalAveragePooling2D and
// GlobalMaxPooling2D). oneDNN computes them (model/onednn_layers.h); the
// reference is model/image_layers.h's.
#include "model/image_layers.h"
#include "model/layer_kind.h"
#include "model/onednn_layers.h"

namespace pstrain::model {
namespace {

class GlobalPool2DKind final : public LayerKindDef {
 public:
  explicit GlobalPool2DKind(bool max) : max_(max) {}

  LayerKind kind() const override {
    return max_ ? LayerKind::kGlobalMaxPool2D : LayerKind::kGlobalAveragePool2D;
  }
  const char* name() const override { return max_ ? "global_max_pool2d" : "global_average_pool2d"; }
  const char* keras_class() const override {
    return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D";
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, ins[0], 3, "[height, width, channels]"));
    return Shape{ins[0][2]};
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    if (CpuKernelsInUse() == CpuKernels::kOneDnn) {
      if (auto layer = CreateOneDnnPoolLayer(a.spec, a.ins[0], a.out, a.max_batch)) return layer;
    }
    return CreateGlobalPool2DLayer(a.spec, a.ins[0], a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    // Over the positions of NCHW or of [N, H, W, C]: [N, C] either way.
    return OnnxValue{g.Node(max_ ? "ReduceMax" : "ReduceMean", {xs[0].name},
                            {OnnxAttr::Ints("axes", xs[0].nchw ? std::vector<int64_t>{2, 3}
                                                               : std::vector<int64_t>{1, 2}),
                             OnnxAttr::Int("keepdims", 0)})};
  }

 private:
  const bool max_;
};

const GlobalPool2DKind kGlobalAveragePool2D(/*max=*/false);
const GlobalPool2DKind kGlobalMaxPool2D(/*max=*/true);
PSTRAIN_REGISTER_LAYER_KIND(kGlobalAveragePool2D);
PSTRAIN_REGISTER_LAYER_KIND(kGlobalMaxPool2D);

}  // namespace
}  // namespace pstrain::model
