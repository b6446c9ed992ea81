// dense: [N] -> [units], kernel [N, units] and a bias [units] (unless
// use_bias: false); ReLU or another activation after the bias. Keras's
// Dense on a flat input; the last layer of every model (its logits).
#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "model/kinds/kind_config.h"
#include "model/layer_kind.h"

namespace pstrain::model {
namespace {

class DenseLayer final : public Layer {
 public:
  DenseLayer(const CpuLayerArgs& a)
      : Layer(a.spec, a.ins[0], a.out),
        kernel_at_(a.kernel_at),
        bias_at_(a.bias_at),
        activation_(a.spec.activation) {}

  void Forward(const float* params, const float* in, int batch, bool, float* out) override {
    const int64_t k = in_size_, n = out_size_;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, n, k, 1.0f, in, k,
                params + kernel_at_, n, 0.0f, out, n);
    BiasActivation(bias_at_ < 0 ? nullptr : params + bias_at_, batch, n, spec_.relu, out);
    activation_.Forward(batch * n, out);
  }

  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    const int64_t k = in_size_, n = out_size_;
    activation_.Backward(batch * n, out, d_out);
    ReluAndBiasGradient(out, batch, n, spec_.relu, d_out,
                        bias_at_ < 0 ? nullptr : grads + bias_at_);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, batch, 1.0f, in, k, d_out, n, 0.0f,
                grads + kernel_at_, n);
    if (d_in != nullptr) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, k, n, 1.0f, d_out, n,
                  params + kernel_at_, n, 0.0f, d_in, k);
    }
  }

  void AppendGemms(int batch, bool input_grad, std::vector<GemmShape>* out) const override {
    out->push_back({false, false, batch, out_size_, in_size_});
    out->push_back({true, false, in_size_, out_size_, batch});
    if (input_grad) out->push_back({false, true, batch, in_size_, out_size_});
  }

 private:
  const int64_t kernel_at_, bias_at_;
  ActivationPass activation_;  // one other than ReLU (that is spec_.relu's pass)
};

class DenseKind final : public LayerKindDef {
 public:
  LayerKind kind() const override { return LayerKind::kDense; }
  const char* name() const override { return "dense"; }
  const char* keras_class() const override { return "Dense"; }
  const char* kernel_name() const override { return "kernel"; }

  absl::Status ParseConfig(const LayerConfigEntry& e, const Shape& in,
                           LayerSpec* layer) const override {
    const auto& d = static_cast<const v1::DenseLayer&>(e.message());
    if (!d.has_units()) {
      return e.Missing("units", e.last() ? " (the last layer's may be left to the data: a "
                                           "labels.txt in --data_dir gives the classes)"
                                         : "");
    }
    if (d.units() < 1 || d.units() > 65536) {
      return e.Bad("units",
                   absl::StrCat(d.units(), " must be positive, at most 65536 (units per example)"));
    }
    if (d.input_dim() != 0 && (in.size() != 1 || d.input_dim() != in[0])) {
      return e.Bad("input_dim",
                   absl::StrCat(d.input_dim(), " does not chain: ",
                                e.index() == 0 ? "the input is " : "the layer before gives ",
                                ShapeString(in)));
    }
    layer->units = static_cast<int>(d.units());
    layer->use_bias = !d.has_use_bias() || d.use_bias();
    kinds::SetConfigActivation(d.activation(), layer);
    if (layer->activation == Activation::kSoftmax && !e.last()) {
      return e.Bad("activation", kSoftmaxOnlyLast);
    }
    if (!d.kernel_initializer().empty()) layer->kernel_initializer = d.kernel_initializer();
    if (!d.bias_initializer().empty()) layer->bias_initializer = d.bias_initializer();
    return kinds::CheckConfigInitializers(e, *layer, "kernel_initializer");
  }

  absl::StatusOr<Shape> OutputShape(const LayerSpec& spec,
                                    const std::vector<Shape>& ins) const override {
    const Shape& in = ins[0];
    PSTRAIN_RETURN_IF_ERROR(kinds::NeedRank(spec, in, 1, "flat [N]"));
    PSTRAIN_RETURN_IF_ERROR(kinds::CheckLayerActivation(spec, /*softmax=*/true));
    if (spec.units < 1) {
      return absl::InvalidArgumentError(absl::StrCat("dense has ", spec.units, " units"));
    }
    PSTRAIN_RETURN_IF_ERROR(kinds::CheckKernelSize(spec, {in[0], spec.units}));
    return Shape{spec.units};
  }

  std::vector<LayerVariable> Variables(const LayerSpec& spec, const Shape& in) const override {
    return kinds::KernelAndBias(spec, "kernel", {in[0], spec.units}, spec.units);
  }

  std::unique_ptr<Layer> CreateCpu(const CpuLayerArgs& a) const override {
    return std::make_unique<DenseLayer>(a);
  }

  absl::Status DescribeCuda(const LayerSpec& spec, const Shape& in,
                            PstrainCudaLayer* d) const override {
    PSTRAIN_RETURN_IF_ERROR(kinds::CudaKernelLayer(spec));
    d->kind = kPstrainCudaDense;
    d->units = spec.units;
    d->relu = spec.relu ? 1 : 0;
    return absl::OkStatus();
  }

  absl::StatusOr<OnnxValue> ExportOnnx(OnnxGraph& g, const LayerSpec& spec,
                                       const std::vector<Shape>& ins,
                                       const std::vector<OnnxValue>& xs) const override {
    const std::string in = g.ChannelsLast(xs[0], ins[0]);
    PSTRAIN_ASSIGN_OR_RETURN(std::string kernel,
                             g.VariableTensor(spec.name + "/kernel", {ins[0][0], spec.units}));
    std::string y = g.Node("MatMul", {in, kernel});
    if (spec.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(std::string bias,
                               g.VariableTensor(spec.name + "/bias", {spec.units}));
      y = g.Node("Add", {y, bias});
    }
    return OnnxValue{g.Activation(spec.relu ? Activation::kRelu : spec.activation, y)};
  }
};

const DenseKind kDense;
PSTRAIN_REGISTER_LAYER_KIND(kDense);

}  // namespace
}  // namespace pstrain::model
