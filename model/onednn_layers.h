// Conv1D, Conv2D and DepthwiseConv2D layers (model/onednn_conv.h) and the
// pools (MaxPooling1D/2D, AveragePooling2D, GlobalAveragePooling2D,
// GlobalMaxPooling2D; model/onednn_pool.h) computed by oneDNN: the same
// shapes, variables and results as the layers of model/layers.h and
// model/image_layers.h, which stay the reference they are tested against
// and what runs when oneDNN cannot build a primitive or
// PSTRAIN_CPU_KERNELS=reference (CpuKernelsInUse).
#ifndef PSTRAIN_MODEL_ONEDNN_CONV_LAYER_H_
#define PSTRAIN_MODEL_ONEDNN_CONV_LAYER_H_

#include <array>
#include <memory>

#include "model/layers.h"

namespace pstrain::model {

// The layer, or null where oneDNN cannot compute it. `kernel_at` and
// `bias_at` as Layer::Create's. REQUIRES: spec a conv1d, conv2d or
// depthwise_conv2d and LayerOutputShape(spec, in) == out.
// `padding`: the zeros a zero_padding2d in front adds around `in` (top,
// bottom, left, right), folded into the convolution's own padding; `in` is
// then the unpadded input.
std::unique_ptr<Layer> CreateOneDnnConvLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out, int max_batch, int64_t kernel_at,
                                             int64_t bias_at,
                                             const std::array<int, 4>& padding = {0, 0, 0, 0});
// The same for a pool. REQUIRES: spec a max_pool1d, max_pool2d,
// average_pool2d, global_average_pool2d or global_max_pool2d.
std::unique_ptr<Layer> CreateOneDnnPoolLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out, int max_batch);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONEDNN_CONV_LAYER_H_
