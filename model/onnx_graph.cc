#include "model/onnx_graph.h"

#include <utility>

namespace pstrain::model {

OnnxAttr OnnxAttr::Int(std::string name, int64_t v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.type = Type::kInt;
  a.i = v;
  return a;
}

OnnxAttr OnnxAttr::Ints(std::string name, std::vector<int64_t> v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.type = Type::kInts;
  a.ints = std::move(v);
  return a;
}

OnnxAttr OnnxAttr::Float(std::string name, float v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.type = Type::kFloat;
  a.f = v;
  return a;
}

OnnxAttr OnnxAttr::String(std::string name, std::string v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.type = Type::kString;
  a.s = std::move(v);
  return a;
}

std::string OnnxGraph::Reshape(const std::string& in, const Shape& shape) {
  std::vector<int64_t> dims = {0};  // 0: Reshape copies the batch dimension
  dims.insert(dims.end(), shape.begin(), shape.end());
  return Node("Reshape", {in, Ints(dims)});
}

std::string OnnxGraph::Transpose(const std::string& in, const std::vector<int64_t>& perm) {
  return Node("Transpose", {in}, {OnnxAttr::Ints("perm", perm)});
}

std::string OnnxGraph::ChannelsLast(const OnnxValue& v, const Shape& shape) {
  if (!v.nchw) return v.name;
  const std::string y = Transpose(v.name, {0, 2, 3, 1});
  return shape.size() == 2 ? Reshape(y, shape) : y;
}

std::string OnnxGraph::Activation(model::Activation a, const std::string& x) {
  switch (a) {
    case Activation::kLinear:
    case Activation::kSoftmax:
      return x;
    case Activation::kRelu:
      return Node("Relu", {x});
    case Activation::kRelu6:
      return Node("Clip", {x, Scalar(0.0f), Scalar(6.0f)});
    case Activation::kSigmoid:
      return Node("Sigmoid", {x});
    case Activation::kTanh:
      return Node("Tanh", {x});
    case Activation::kElu:
      return Node("Elu", {x});  // alpha 1, ONNX's default as Keras's
    case Activation::kSelu:
      return Node("Selu", {x});  // ONNX's defaults are SELU's constants
    case Activation::kGelu: {
      // x * (1 + erf(x / sqrt(2))) / 2: opset 13 has no Gelu.
      const std::string erf = Node("Erf", {Node("Mul", {x, Scalar(0.7071067811865476f)})});
      const std::string half = Node("Mul", {Node("Add", {erf, Scalar(1.0f)}), Scalar(0.5f)});
      return Node("Mul", {x, half});
    }
    case Activation::kSwish:
      return Node("Mul", {x, Node("Sigmoid", {x})});
  }
  return x;
}

absl::StatusOr<std::string> OnnxGraph::VariableTensor(const std::string& name, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  absl::StatusOr<const float*> values = Variable(name, n);
  if (!values.ok()) return values.status();
  return Floats(name, dims, *values);
}

}  // namespace pstrain::model
