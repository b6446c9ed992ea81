// A model's description, apart from any computation: its layers' graph
// (which positions each layer reads, every position's shape) and where its
// variables live (model/param_layout.h). Built once from a NetworkSpec
// (model/network.h) and checked there; what placement, summaries, exports,
// job descriptions and the backends' layout checks read, without the
// activations and primitives an executor (model::Network) holds.
//
// Positions: 0 is the model's input (after its embeddings, if any), l + 1
// layer l's output.
//
// Thread-safe: immutable after Create.
#ifndef PSTRAIN_MODEL_MODEL_GRAPH_H_
#define PSTRAIN_MODEL_MODEL_GRAPH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/embeddings.h"
#include "model/layers.h"
#include "model/network_spec.h"
#include "model/param_layout.h"

namespace pstrain::model {

class ModelGraph {
 public:
  // InvalidArgument naming the layer for no layers, a missing or repeated
  // name, an input that names no earlier layer (nor "input"), a layer
  // whose output no later layer reads (the last's aside), a layer whose
  // inputs do not fit it (LayerOutputShape's errors), a last layer that is
  // not dense, has a ReLU or fewer than 2 units, or an initializer that
  // does not parse; or for input_dim < 1 or an input_shape whose size is
  // not input_dim.
  static absl::StatusOr<ModelGraph> Create(const NetworkSpec& spec);

  const NetworkSpec& spec() const { return spec_; }
  // Where each variable lives: the layers' variables in the flat array, as
  // their kinds declare them (model/layer_kind.h; layer numbers there
  // count the layers with variables only), then each embedding's table
  // (embedding: true, sync or async as spec().sync_tables says; their rows
  // are not in the flat array, they move by id).
  const ParamLayout& layout() const { return layout_; }
  const std::vector<VariableDef>& variables() const { return layout_.variables(); }
  const std::vector<int64_t>& offsets() const { return layout_.offsets(); }
  int64_t num_parameters() const { return layout_.num_parameters(); }
  // The embeddings before the first layer (empty when the model has none).
  const Embeddings& embeddings() const { return embeddings_; }
  // Floats per example the layers read: input_dim, or the embeddings'
  // output.
  int input_width() const { return static_cast<int>(ShapeSize(shapes_[0])); }
  // The input's shape and each layer's output shape, by position.
  const std::vector<Shape>& shapes() const { return shapes_; }
  // The positions layer l reads, in order; {l} in a stack.
  const std::vector<int>& layer_inputs(int l) const { return inputs_[l]; }
  // The shape of layer l's first (for most layers its only) input.
  const Shape& input_shape(int l) const { return shapes_[inputs_[l][0]]; }
  // Whether every layer reads the one before it (a Keras Sequential
  // model); else the layers form a graph.
  bool sequential() const { return sequential_; }
  // The position whose memory holds position p: its own, or for a layer
  // whose kind aliases its input (flatten) its input's.
  int storage(int p) const { return storage_[p]; }
  // Layer l's number in layout() (-1: it has no variables), and where its
  // first variable and its bias lie in the flat array (-1: none).
  int param_layer(int l) const { return param_layer_[l]; }
  int64_t kernel_at(int l) const { return kernel_at_[l]; }
  int64_t bias_at(int l) const { return bias_at_[l]; }

  // Each variable's initial values, reproducible from `seed` (one stream
  // drawn variable by variable in layout order; zeros and ones draw none).
  std::vector<float> InitialParameters(uint64_t seed) const;

  // InvalidArgument naming the first label outside [0, num_classes).
  absl::Status CheckLabels(const int32_t* labels, int64_t n) const;

 private:
  ModelGraph(const NetworkSpec& spec, Embeddings embeddings, std::vector<Shape> shapes,
             std::vector<std::vector<int>> inputs);

  NetworkSpec spec_;
  Embeddings embeddings_;
  std::vector<Shape> shapes_;
  std::vector<std::vector<int>> inputs_;
  bool sequential_ = true;
  std::vector<int> storage_;
  ParamLayout layout_;
  std::vector<int> param_layer_;
  std::vector<int64_t> kernel_at_, bias_at_;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_MODEL_GRAPH_H_
