// Keras's applications as model configs: a config's `application` block
// expands to the layers Keras builds, with Keras's layer names, so that
// `pstrain summary` prints Keras's table and its counts, and checkpoints,
// exports and placements name the variables as Keras does.
//   mobilenet_v2  tf.keras.applications.MobileNetV2(input_shape, alpha,
//                 classes): a stride-2 Conv1, 17 inverted residual blocks
//                 (expand 1x1, ZeroPadding2D before a stride-2 depthwise
//                 3x3, project 1x1, Add where the shapes allow), Conv_1,
//                 GlobalAveragePooling2D, Dense softmax; every convolution
//                 without a bias and followed by a BatchNormalization
//                 (epsilon 1e-3, momentum 0.999), ReLU(6.) after all but the
//                 projections. Widths as Keras rounds them to multiples of 8.
//   resnet50      tf.keras.applications.ResNet50(input_shape, classes):
//                 conv1 7x7/2 after ZeroPadding2D(3), max pool 3x3/2, four
//                 stacks of bottleneck blocks (3, 4, 6, 3; the first of
//                 each with a projection shortcut), GlobalAveragePooling2D,
//                 Dense softmax; convolutions with biases, batch
//                 normalizations with epsilon 1.001e-5 (momentum 0.99).
// The input shape is the config's input_shape (default 224x224x3).
#ifndef PSTRAIN_MODEL_APPLICATIONS_H_
#define PSTRAIN_MODEL_APPLICATIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/model_config.pb.h"

namespace pstrain::model {

// Keras's default input shape of its applications.
inline constexpr int64_t kApplicationInput[3] = {224, 224, 3};

// Replaces config->application with the layers it names (and the
// input_shape it takes by default). InvalidArgument naming the field for
// an unknown name, an alpha outside (0, 4], classes below 2, a
// bn_momentum outside [0, 1], an input of another rank than [H, W, C] or
// smaller than 32x32, and layers given beside it. A config without an
// application is left as it is.
absl::Status ExpandApplication(v1::ModelConfig* config);

// The application names, for messages: "mobilenet_v2, resnet50".
std::string ApplicationNames();

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_APPLICATIONS_H_
