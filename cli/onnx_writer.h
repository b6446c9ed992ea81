// A trained model as an ONNX file (Debian's libonnx-dev: onnx-ml.proto),
// for runtimes and converters that read ONNX: the network's layers as ONNX
// operators (opset 13) with the trained values as initializers, from the
// float32 input "input" [batch, input_dim] to "logits" and "probabilities"
// [batch, classes] (softmax; sigmoid for one logit), which equal what
// `pstrain predict` writes for the same checkpoint. Keras's channels-last
// layout is kept at the edges: convolutions and pools run in ONNX's NCHW
// between two transposes, and a 1D layer as a 2D one of height 1.
// Stateless; thread-safe.
#ifndef PSTRAIN_CLI_ONNX_WRITER_H_
#define PSTRAIN_CLI_ONNX_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"
#include "model/network.h"

namespace pstrain {

// The serialized ModelProto of `spec` with `params` laid out as
// `variables` at `offsets` (model::Network's layout). InvalidArgument for
// a model with embedding tables (their lookups are not written as ONNX
// yet; NumPy's .npz carries them) or variables that disagree with the
// layers.
absl::StatusOr<std::string> OnnxModelBytes(const model::NetworkSpec& spec,
                                           const std::vector<VariableDef>& variables,
                                           const std::vector<int64_t>& offsets,
                                           const std::vector<float>& params,
                                           const std::string& producer_version);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_ONNX_WRITER_H_
