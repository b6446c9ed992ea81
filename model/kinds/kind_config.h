// What the kinds' config readers (LayerKindDef::ParseConfig) share: the
// forms of proto/model_config.proto's windows and activations.
#ifndef PSTRAIN_MODEL_KINDS_KIND_CONFIG_H_
#define PSTRAIN_MODEL_KINDS_KIND_CONFIG_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "model/layer_kind.h"
#include "proto/model_config.pb.h"

namespace pstrain::model::kinds {

// A repeated size field (kernel_size, strides, pool_size) as [height,
// width]: 1D layers take one value ([1, v]); 2D one (a square) or two.
// Empty: [fallback_h, fallback_w]. InvalidArgument (the field's own words,
// "has 3 values: ...", "0 must be in 1..65536") for any other.
absl::StatusOr<std::array<int, 2>> ConfigWindow(
    const google::protobuf::RepeatedField<int64_t>& values, bool one_d, int fallback_h,
    int fallback_w);

// A dense or convolution layer's activation: ReLU its fast flag, any
// other by Keras's name (model/activations.h).
void SetConfigActivation(pstrain::v1::Activation a, LayerSpec* layer);

// What a convolution's config (ConvLayer, DepthwiseConvLayer) says of its
// window, bias and activation, checked at their fields.
template <typename Config>
absl::Status ParseConvConfig(const LayerConfigEntry& e, const Config& c, bool one_d,
                             LayerSpec* layer) {
  if (c.kernel_size().empty()) return e.Missing("kernel_size", "");
  auto kernel = ConfigWindow(c.kernel_size(), one_d, 1, 1);
  if (!kernel.ok()) return e.Bad("kernel_size", kernel.status().message());
  auto strides = ConfigWindow(c.strides(), one_d, 1, 1);
  if (!strides.ok()) return e.Bad("strides", strides.status().message());
  layer->window = *kernel;
  layer->stride = *strides;
  layer->same_padding = c.padding() == pstrain::v1::same;
  layer->use_bias = !c.has_use_bias() || c.use_bias();
  SetConfigActivation(c.activation(), layer);
  if (layer->activation == Activation::kSoftmax) return e.Bad("activation", kSoftmaxOnlyLast);
  if (!c.bias_initializer().empty()) layer->bias_initializer = c.bias_initializer();
  return absl::OkStatus();
}

// The layer's kernel and bias initializers parse (cluster/
// initializer_spec.h), else InvalidArgument at `kernel_field` (Keras's
// name: "kernel_initializer", "depthwise_initializer") or
// bias_initializer.
absl::Status CheckConfigInitializers(const LayerConfigEntry& e, const LayerSpec& layer,
                                     const char* kernel_field);

// A pool's config (PoolLayer): its window (default 2, [1, 2] in 1D), its
// stride (default the window) and padding, checked at their fields.
absl::Status ParsePoolConfig(const LayerConfigEntry& e, bool one_d, LayerSpec* layer);

}  // namespace pstrain::model::kinds

#endif  // PSTRAIN_MODEL_KINDS_KIND_CONFIG_H_
