// A trained model as an ONNX file (Debian's libonnx-dev: onnx-ml.proto),
// for runtimes and converters that read ONNX: the network's layers as ONNX
// operators (opset 13) with the trained values as initializers, from the
// float32 input "input" [batch, input_dim] to "logits" and "probabilities"
// [batch, classes] (softmax; sigmoid for one logit), which equal what
// `pstrain predict` writes for the same checkpoint (embedding lookups
// included). Keras's channels-last
// layout is kept at the edges: a run of convolutions and pools (their
// ReLUs, dropouts) runs in ONNX's NCHW between one transpose in and one
// out, and a 1D layer as a 2D one of height 1.
// Stateless; thread-safe.
#ifndef PSTRAIN_EXPORTER_ONNX_WRITER_H_
#define PSTRAIN_EXPORTER_ONNX_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/placement.h"
#include "model/model_graph.h"
#include "model/network.h"

namespace pstrain {

// The serialized ModelProto of `net`'s model (its layers, in the graph
// they form) with `params` in its layout and each embedding table whole
// in `tables` (by variable name, [vocabulary, dim] row-major).
// A model with embeddings reads its ids as model/embedding_bag.h says:
// pixel_buckets from "input", feature:NAME from a second input "ids"
// [batch, ids_width] (int64, the input's id layout, data/feature_spec.h);
// each table is a Gather, a bag its kept rows' sum or mean. InvalidArgument
// for variables or tables that disagree with the layers.
absl::StatusOr<std::string> OnnxModelBytes(const model::ModelGraph& net,
                                           const std::vector<float>& params,
                                           const std::map<std::string, std::vector<float>>& tables,
                                           const std::string& producer_version);

}  // namespace pstrain

#endif  // PSTRAIN_EXPORTER_ONNX_WRITER_H_
