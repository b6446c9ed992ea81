#include "model/onednn_layers.h"

#include <utility>

#include "model/activations.h"
#include "model/onednn_conv.h"
#include "model/onednn_pool.h"

namespace pstrain::model {

namespace {

class OneDnnConvLayer final : public Layer {
 public:
  OneDnnConvLayer(const LayerSpec& spec, const Shape& in, const Shape& out,
                  const PstrainWindow& window, std::unique_ptr<OneDnnConv> conv, int64_t kernel_at,
                  int64_t bias_at)
      : Layer(spec, in, out),
        conv_(std::move(conv)),
        window_(window),
        kernel_at_(kernel_at),
        bias_at_(bias_at),
        activation_(spec.activation) {}

  void Forward(const float* params, const float* in, int batch, bool, float* out) override {
    conv_->Forward(in, params + kernel_at_, bias_at_ < 0 ? nullptr : params + bias_at_, batch, out);
    activation_.Forward(batch * out_size_, out);
  }

  void Backward(const float* params, const float* in, const float* out, float* d_out, int batch,
                float* grads, float* d_in) override {
    activation_.Backward(batch * out_size_, out, d_out);
    // The ReLU's mask; oneDNN sums the bias gradient with the kernel's.
    ReluAndBiasGradient(out, batch * window_.oh * window_.ow, out_channels(), spec_.relu, d_out,
                        nullptr);
    conv_->BackwardWeights(in, d_out, batch, grads + kernel_at_,
                           bias_at_ < 0 ? nullptr : grads + bias_at_);
    if (d_in != nullptr) conv_->BackwardData(d_out, params + kernel_at_, batch, d_in);
  }

  bool on_onednn() const override { return true; }

  void AppendGemms(int batch, bool input_grad, std::vector<GemmShape>* out) const override {
    if (spec_.kind == LayerKind::kDepthwiseConv2D) return;  // no sgemm in the reference either
    AppendConvGemms(window_, spec_.units, batch, input_grad, out);
  }

 private:
  int64_t out_channels() const { return out_.back(); }

  const std::unique_ptr<OneDnnConv> conv_;
  const PstrainWindow window_;
  const int64_t kernel_at_, bias_at_;
  ActivationPass activation_;  // one other than ReLU (that is the primitive's)
};

class OneDnnPoolLayer final : public Layer {
 public:
  OneDnnPoolLayer(const LayerSpec& spec, const Shape& in, const Shape& out,
                  std::unique_ptr<OneDnnPool> pool)
      : Layer(spec, in, out), pool_(std::move(pool)) {}

  void Forward(const float*, const float* in, int batch, bool, float* out) override {
    pool_->Forward(in, batch, out);
  }

  void Backward(const float*, const float*, const float*, float* d_out, int batch, float*,
                float* d_in) override {
    if (d_in != nullptr) pool_->Backward(d_out, batch, d_in);
  }

  bool on_onednn() const override { return true; }

 private:
  const std::unique_ptr<OneDnnPool> pool_;
};

}  // namespace

std::unique_ptr<Layer> CreateOneDnnPoolLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out, int max_batch) {
  const bool global =
      spec.kind == LayerKind::kGlobalAveragePool2D || spec.kind == LayerKind::kGlobalMaxPool2D;
  PstrainWindow window;
  if (global) {  // one window over the whole input
    window = PstrainWindow{in[0], in[1], in[2], 1, 1, 0, 0, 1, 1, 0, 0};
    window.kh = static_cast<int32_t>(in[0]);
    window.kw = static_cast<int32_t>(in[1]);
  } else {
    window = LayerWindow(spec, in);
  }
  const bool max = spec.kind == LayerKind::kMaxPool1D || spec.kind == LayerKind::kMaxPool2D ||
                   spec.kind == LayerKind::kGlobalMaxPool2D;
  auto made = OneDnnPool::Create(window, max, max_batch);
  if (!made.ok()) return nullptr;
  return std::make_unique<OneDnnPoolLayer>(spec, in, out, *std::move(made));
}

std::unique_ptr<Layer> CreateOneDnnConvLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out, int max_batch, int64_t kernel_at,
                                             int64_t bias_at, const std::array<int, 4>& padding) {
  OneDnnConvSpec conv;
  const int top = padding[0], bottom = padding[1], left = padding[2], right = padding[3];
  // The window over the padded input, then over the input itself with the
  // pad's zeros as the convolution's (those after follow from the output
  // positions: onednn_engine.h's PaddingAfter).
  const bool padded = top != 0 || bottom != 0 || left != 0 || right != 0;
  conv.window = LayerWindow(
      spec, padded ? Shape{in[0] + top + bottom, in[1] + left + right, in[2]} : in);
  if (padded) {
    conv.window.h = in[0];
    conv.window.w = in[1];
    conv.window.pad_top += top;
    conv.window.pad_left += left;
  }
  conv.out_channels = out.back();
  conv.groups = spec.kind == LayerKind::kDepthwiseConv2D ? conv.window.c : 1;
  conv.bias = bias_at >= 0;
  conv.relu = spec.relu;
  auto made = OneDnnConv::Create(conv, max_batch);
  if (!made.ok()) return nullptr;
  return std::make_unique<OneDnnConvLayer>(spec, in, out, conv.window, *std::move(made), kernel_at,
                                           bias_at);
}

}  // namespace pstrain::model
