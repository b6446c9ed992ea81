#include "model/param_layout.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::model {

const char* ParamRoleName(ParamRole role) {
  switch (role) {
    case ParamRole::kKernel:
      return "kernel";
    case ParamRole::kBias:
      return "bias";
    case ParamRole::kTable:
      return "table";
    case ParamRole::kGamma:
      return "gamma";
    case ParamRole::kBeta:
      return "beta";
    case ParamRole::kMovingMean:
      return "moving_mean";
    case ParamRole::kMovingVariance:
      return "moving_variance";
  }
  return "?";
}

void ParamLayout::AddFlat(VariableDef def, int layer, ParamRole role) {
  const int index = static_cast<int>(variables_.size());
  const int64_t elements = def.elements();
  offsets_.push_back(num_parameters_);
  num_parameters_ += elements;
  variables_.push_back(std::move(def));
  layer_.push_back(layer);
  role_.push_back(role);
  if (static_cast<int>(by_layer_.size()) <= layer) by_layer_.resize(layer + 1);
  by_layer_[layer].push_back(index);
  // Tables added before take no room, so their offsets stay at the end.
  for (int i = 0; i < index; ++i) {
    if (variables_[i].embedding) offsets_[i] = num_parameters_;
  }
}

void ParamLayout::AddTable(VariableDef def) {
  def.embedding = true;
  offsets_.push_back(num_parameters_);
  variables_.push_back(std::move(def));
  layer_.push_back(-1);
  role_.push_back(ParamRole::kTable);
}

int64_t ParamLayout::OffsetOf(int layer, ParamRole role) const {
  if (layer < 0 || layer >= num_layers()) return -1;
  for (int v : by_layer_[layer]) {
    if (role_[v] == role) return offsets_[v];
  }
  return -1;
}

std::vector<int64_t> ParamLayout::LayerOffsets(ParamRole role) const {
  std::vector<int64_t> out;
  for (int l = 0; l < num_layers(); ++l) out.push_back(OffsetOf(l, role));
  return out;
}

int ParamLayout::FirstTable() const {
  for (size_t i = 0; i < variables_.size(); ++i) {
    if (variables_[i].embedding) return static_cast<int>(i);
  }
  return -1;
}

std::string ParamLayout::Describe() const {
  std::vector<std::string> lines;
  for (size_t i = 0; i < variables_.size(); ++i) {
    const VariableDef& v = variables_[i];
    const std::string shape = absl::StrCat("[", absl::StrJoin(v.shape, ", "), "]");
    if (v.embedding) {
      lines.push_back(absl::StrCat(v.name, " ", shape, " table, by row"));
    } else {
      lines.push_back(absl::StrCat(v.name, " ", shape, " layer ", layer_[i], " ",
                                   ParamRoleName(role_[i]), " at ", offsets_[i]));
    }
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace pstrain::model
