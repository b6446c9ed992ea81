// The CPU layers of image models beyond convolution and max pooling, each
// a forward and a backward pass over row-major channels-last batches:
//   depthwise_conv2d       each channel convolved with its own
//                          depth_multiplier kernels (Keras's
//                          DepthwiseConv2D), as direct loops over channels
//   global_average_pool2d  [H, W, C] -> [C], the mean over positions
//   global_max_pool2d      [H, W, C] -> [C], the maximum (its gradient to
//                          the first position holding it)
//   average_pool2d         the window's mean per channel; with "same"
//                          padding, of the cells inside the input only
//                          (Keras's AveragePooling2D)
//   zero_padding2d         [H, W, C] -> [H + top + bottom, W + left + right, C]
//   activation, relu       LayerSpec::activation (model/activations.h)
//                          applied alone, as Keras's Activation and ReLU
//                          (ReLU(6.0): relu6)
//   rescaling              x * rescale + offset, as Keras's Rescaling (an
//                          image model's input brought to [0, 1] or [-1, 1])
// Shapes are checked by LayerOutputShape (model/layers.h), which these
// factories require.
#ifndef PSTRAIN_MODEL_IMAGE_LAYERS_H_
#define PSTRAIN_MODEL_IMAGE_LAYERS_H_

#include <memory>

#include "model/layers.h"

namespace pstrain::model {

std::unique_ptr<Layer> CreateGlobalPool2DLayer(const LayerSpec& spec, const Shape& in,
                                               const Shape& out);
std::unique_ptr<Layer> CreateAveragePool2DLayer(const LayerSpec& spec, const Shape& in,
                                                const Shape& out);
std::unique_ptr<Layer> CreateZeroPadding2DLayer(const LayerSpec& spec, const Shape& in,
                                                const Shape& out);
// `kernel_at` and `bias_at` as Layer::Create's (bias_at -1: no bias).
std::unique_ptr<Layer> CreateDepthwiseConv2DLayer(const LayerSpec& spec, const Shape& in,
                                                  const Shape& out, int64_t kernel_at,
                                                  int64_t bias_at);
std::unique_ptr<Layer> CreateActivationLayer(const LayerSpec& spec, const Shape& in,
                                             const Shape& out);
std::unique_ptr<Layer> CreateRescalingLayer(const LayerSpec& spec, const Shape& in);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_IMAGE_LAYERS_H_
