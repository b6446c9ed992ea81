// The ONNX graph a layer kind (model/layer_kind.h) writes its inference
// nodes into: the exporter (exporter/onnx_writer.h) holds the protobuf
// behind it, so that a kind's ONNX form lives beside the rest of its
// definition without the layers depending on ONNX's messages.
//
// Thread-compatible.
#ifndef PSTRAIN_MODEL_ONNX_GRAPH_H_
#define PSTRAIN_MODEL_ONNX_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/activations.h"

namespace pstrain::model {

using Shape = std::vector<int64_t>;

// One attribute of a node, of ONNX's INT, INTS, FLOAT or STRING type.
struct OnnxAttr {
  enum class Type { kInt, kInts, kFloat, kString };
  std::string name;
  Type type = Type::kInt;
  int64_t i = 0;
  std::vector<int64_t> ints;
  float f = 0;
  std::string s;

  static OnnxAttr Int(std::string name, int64_t v);
  static OnnxAttr Ints(std::string name, std::vector<int64_t> v);
  static OnnxAttr Float(std::string name, float v);
  static OnnxAttr String(std::string name, std::string v);
};

// A value between layers: channels last, as the model's shapes are, or,
// between convolutions and pools, ONNX's NCHW ([n, c, 1, t] for a 1D one),
// so that a run of them is transposed once in and once out rather than
// around each.
struct OnnxValue {
  std::string name;
  bool nchw = false;
};

class OnnxGraph {
 public:
  virtual ~OnnxGraph() = default;

  // A node of `op` over `inputs` with `attrs`; returns its (one) output's
  // name.
  virtual std::string Node(const std::string& op, const std::vector<std::string>& inputs,
                           const std::vector<OnnxAttr>& attrs = {}) = 0;
  // A float initializer `name` of `dims` from `values`; returns `name`.
  virtual std::string Floats(const std::string& name, const Shape& dims, const float* values) = 0;
  // An int64 initializer [values.size()] (shapes, axes, pads).
  virtual std::string Ints(const std::vector<int64_t>& values) = 0;
  // A float scalar initializer.
  virtual std::string Scalar(float value) = 0;
  // The trained values of model variable `name` (`elements` floats), or
  // InvalidArgument naming it when the model has none of that size.
  virtual absl::StatusOr<const float*> Variable(const std::string& name,
                                                int64_t elements) const = 0;

  // [batch, shape...] (the batch dimension kept).
  std::string Reshape(const std::string& in, const Shape& shape);
  std::string Transpose(const std::string& in, const std::vector<int64_t>& perm);
  // `v` of `shape` channels last.
  std::string ChannelsLast(const OnnxValue& v, const Shape& shape);
  // Keras's activation `a` on `x`, elementwise (so in either layout); a
  // softmax is left to the caller (only the last layer has one: the loss's).
  std::string Activation(model::Activation a, const std::string& x);
  // Model variable `name` of `dims` as an initializer of that name.
  absl::StatusOr<std::string> VariableTensor(const std::string& name, const Shape& dims);
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_ONNX_GRAPH_H_
