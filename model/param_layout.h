// The one description of where a model's variables live, read by the CPU
// MLP (model/network.h), the CUDA kernels (through the offsets they are given)
// and the training loop (which pushes a layer's variables as soon as
// backprop finishes them). Per variable: its name and shape, the layer it
// belongs to and its role there, and where it lives:
//   - in the flat parameter array, at `offset`, variable after variable in
//     the order added (what a worker pulls into and pushes from);
//   - or, for an embedding table, on the PS by row (moved by id; it takes no
//     room in the flat array, and its offset is num_parameters()).
// A new kind of layer adds its variables here; nothing else needs to know
// the order.
#ifndef PSTRAIN_MODEL_PARAM_LAYOUT_H_
#define PSTRAIN_MODEL_PARAM_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/placement.h"

namespace pstrain::model {

// What a variable is to its layer.
enum class ParamRole {
  kKernel,
  kBias,
  kTable,
  // A batch normalization's (model/batch_norm.h).
  kGamma,
  kBeta,
  kMovingMean,
  kMovingVariance,
};

const char* ParamRoleName(ParamRole role);

class ParamLayout {
 public:
  // Adds a variable held in the flat array, after those added before, as
  // `role` of layer `layer` (layers numbered from 0 in the order they
  // compute). REQUIRES: !def.embedding, layer >= 0.
  void AddFlat(VariableDef def, int layer, ParamRole role);
  // Adds an embedding table (def.embedding), moved by id.
  void AddTable(VariableDef def);

  // Every variable, in the order added (what the PS are told to hold).
  const std::vector<VariableDef>& variables() const { return variables_; }
  // Each variable's offset in the flat array (same order).
  const std::vector<int64_t>& offsets() const { return offsets_; }
  // Floats in the flat array.
  int64_t num_parameters() const { return num_parameters_; }
  // Each variable's layer (-1: none, a table) and role (same order).
  int layer_of(int variable) const { return layer_[variable]; }
  ParamRole role_of(int variable) const { return role_[variable]; }
  bool in_flat(int variable) const { return !variables_[variable].embedding; }

  // Layers with variables in the flat array: one more than the highest
  // layer added.
  int num_layers() const { return static_cast<int>(by_layer_.size()); }
  // Indices of layer `layer`'s variables, in the order added.
  const std::vector<int>& LayerVariables(int layer) const { return by_layer_[layer]; }
  // The offset of layer `layer`'s variable with `role`, or -1 when it has
  // none.
  int64_t OffsetOf(int layer, ParamRole role) const;
  // OffsetOf(l, role) for each layer l in order: what the MLP and the CUDA
  // kernels index by layer.
  std::vector<int64_t> LayerOffsets(ParamRole role) const;
  // The index of the first table, or -1 when there is none.
  int FirstTable() const;

  // One line per variable: "name [d0, d1] layer L role at OFFSET" or
  // "name [v, d] table, by row": for logs and errors.
  std::string Describe() const;

 private:
  std::vector<VariableDef> variables_;
  std::vector<int64_t> offsets_;
  std::vector<int> layer_;
  std::vector<ParamRole> role_;
  std::vector<std::vector<int>> by_layer_;
  int64_t num_parameters_ = 0;
};

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_PARAM_LAYOUT_H_
