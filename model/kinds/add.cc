// add: several inputs of one shape -> their sum (Keras's Add: a residual
// connection); the gradient goes to each input as it is.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

// The sum of its inputs; its gradient goes to each of them as it is.
class AddLayer final : public Layer {
 public:
  AddLayer(const LayerSpec& spec, const std::vector<Shape>& ins, const Shape& out)
      : Layer(spec, ins[0], out), inputs_(static_cast<int>(ins.size())) {}

  void Forward(const float* params, const float* in, int batch, bool training,
               float* out) override {
    ForwardInputs(params, &in, batch, training, out);
  }
  void ForwardInputs(const float*, const float* const* ins, int batch, bool,
                     float* __restrict out) override {
    const int64_t n = batch * out_size_;
    const float* __restrict a = ins[0];
    const float* __restrict b = ins[1];
    for (int64_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
    for (int i = 2; i < inputs_; ++i) {
      const float* __restrict c = ins[i];
      for (int64_t j = 0; j < n; ++j) out[j] += c[j];
    }
  }
  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    BackwardInputs(params, &in, out, d_out, batch, grads, &d_in);
  }
  void BackwardInputs(const float*, const float* const*, const float*, float* d_out, int batch,
                      float*, float* const* d_ins) override {
    for (int i = 0; i < inputs_; ++i) {
      if (d_ins[i] != nullptr) std::memcpy(d_ins[i], d_out, batch * out_size_ * sizeof(float));
    }
  }

 private:
  const int inputs_;
};

class AddKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kAdd; }
  const char* name() const override { return "add"; }
  const char* keras_class() const override { return "Add"; }
  bool merges() const override { return true; }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    for (size_t i = 1; i < ins.size(); ++i) {
      if (ins[i] != ins[0]) {
        return absl::InvalidArgumentError(absl::StrCat("add needs inputs of one shape, but input ",
                                                       i, " is ", ShapeString(ins[i]),
                                                       " and input 0 ", ShapeString(ins[0])));
      }
    }
    return ins[0];
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<AddLayer>(a.spec, a.ins, a.out);
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    // In NCHW when every input is, else channels last; ONNX's Add takes
    // two: a chain for more.
    bool nchw = true;
    for (const OnnxValue& x : xs) nchw = nchw && x.nchw;
    std::string y = nchw ? xs[0].name : g.ChannelsLast(xs[0], ins[0]);
    for (size_t i = 1; i < xs.size(); ++i) {
      y = g.Node("Add", {y, nchw ? xs[i].name : g.ChannelsLast(xs[i], ins[i])});
    }
    return OnnxValue{y, nchw};
  }
};

const AddKind kAdd;
PSTRAIN_REGISTER_LAYER_KIND(kAdd);

}  // namespace
}  // namespace pstrain::model
