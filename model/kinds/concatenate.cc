// concatenate: several inputs alike but in their last (channel) axis ->
// side by side along it (Keras's Concatenate on axis -1).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

// Its inputs' rows side by side along the last axis: each example's output
// is runs of `width` (the last axis) from each input in turn.
class ConcatenateLayer final : public Layer {
 public:
  ConcatenateLayer(const LayerSpec& spec, const std::vector<Shape>& ins, const Shape& out)
      : Layer(spec, ins[0], out), runs_(ShapeSize(out) / out.back()) {
    for (const Shape& in : ins) widths_.push_back(in.back());
  }

  void Forward(const float* params, const float* in, int batch, bool training,
               float* out) override {
    ForwardInputs(params, &in, batch, training, out);
  }
  void ForwardInputs(const float*, const float* const* ins, int batch, bool, float* out) override {
    const int64_t c = out_shape().back();
    int64_t at = 0;
    for (size_t i = 0; i < widths_.size(); ++i) {
      const int64_t w = widths_[i];
      const float* in = ins[i];
      for (int64_t r = 0; r < batch * runs_; ++r) {
        std::memcpy(out + r * c + at, in + r * w, w * sizeof(float));
      }
      at += w;
    }
  }
  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    BackwardInputs(params, &in, out, d_out, batch, grads, &d_in);
  }
  void BackwardInputs(const float*, const float* const*, const float*, float* d_out, int batch,
                      float*, float* const* d_ins) override {
    const int64_t c = out_shape().back();
    int64_t at = 0;
    for (size_t i = 0; i < widths_.size(); ++i) {
      const int64_t w = widths_[i];
      if (float* d = d_ins[i]; d != nullptr) {
        for (int64_t r = 0; r < batch * runs_; ++r) {
          std::memcpy(d + r * w, d_out + r * c + at, w * sizeof(float));
        }
      }
      at += w;
    }
  }

 private:
  const int64_t runs_;  // positions per example before the last axis
  std::vector<int64_t> widths_;
};

class ConcatenateKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kConcatenate; }
  const char* name() const override { return "concatenate"; }
  const char* keras_class() const override { return "Concatenate"; }
  bool merges() const override { return true; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& c = static_cast<const v1::ConcatenateLayer&>(e.message());
    // Keras counts the batch axis: the channel axis of a rank-r example is r.
    if (c.has_axis() && c.axis() != -1 && c.axis() != static_cast<int64_t>(in.size())) {
      return e.Bad("axis", absl::StrCat(c.axis(), " is not the last axis (-1, or ", in.size(),
                                        " for an input of ", ShapeString(in),
                                        "): concatenate joins along the channel axis only"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    Shape out = ins[0];
    for (size_t i = 1; i < ins.size(); ++i) {
      const Shape& in = ins[i];
      const bool alike =
          in.size() == out.size() && std::equal(in.begin(), in.end() - 1, ins[0].begin());
      if (!alike) {
        return absl::InvalidArgumentError(absl::StrCat(
            "concatenate joins inputs along their last axis, which must be alike in the others, "
            "but input ",
            i, " is ", ShapeString(in), " and input 0 ", ShapeString(ins[0])));
      }
      out.back() += in.back();
    }
    return out;
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<ConcatenateLayer>(a.spec, a.ins, a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    // In NCHW (its channel axis 1) when every input is, else channels last.
    bool nchw = true;
    for (const OnnxValue& x : xs) nchw = nchw && x.nchw;
    std::vector<std::string> names;
    for (size_t i = 0; i < xs.size(); ++i) {
      names.push_back(nchw ? xs[i].name : g.ChannelsLast(xs[i], ins[i]));
    }
    return OnnxValue{g.Node("Concat", names, {OnnxAttr::Int("axis", nchw ? 1 : -1)}), nchw};
  }
};

const ConcatenateKind kConcatenate;
PSTRAIN_REGISTER_LAYER_KIND(kConcatenate);

}  // namespace
}  // namespace pstrain::model
