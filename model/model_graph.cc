#include "model/model_graph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "cluster/initial_stream.h"
#include "cluster/initializer_spec.h"
#include "model/layer_kind.h"

namespace pstrain::model {

absl::StatusOr<ModelGraph> ModelGraph::Create(const NetworkSpec& spec) {
  // A model whose first layer reads id features may have no float input.
  bool ids_only = !spec.embeddings.empty();
  for (const EmbeddingBagSpec& e : spec.embeddings) ids_only = ids_only && e.from_feature();
  if (spec.input_dim < (ids_only ? 0 : 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input_dim is ", spec.input_dim, ": must be at least 1"));
  }
  if (spec.layers.empty()) return absl::InvalidArgumentError("model has no layers");
  absl::StatusOr<Embeddings> embeddings = Embeddings::Create(spec.embeddings, spec.input_dim);
  if (!embeddings.ok()) return embeddings.status();
  Shape shape = {spec.input_dim};
  if (!embeddings->empty()) {
    shape = embeddings->output_shape();
  } else if (!spec.input_shape.empty()) {
    for (int64_t d : spec.input_shape) {
      if (d < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model input_shape ", ShapeString(spec.input_shape), " has a dimension below 1"));
      }
    }
    if (ShapeSize(spec.input_shape) != spec.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("model input_shape ", ShapeString(spec.input_shape), " holds ",
                       ShapeSize(spec.input_shape), " values but input_dim is ", spec.input_dim));
    }
    shape = spec.input_shape;
  }
  std::vector<Shape> shapes = {shape};
  std::vector<std::vector<int>> inputs;
  // The position each name's output holds (0: the input).
  std::map<std::string, int> position;
  bool graph = false;
  for (const LayerSpec& l : spec.layers) graph = graph || !l.inputs.empty();
  if (graph) position["input"] = 0;
  std::set<std::string> embedding_names;
  for (const EmbeddingBagSpec& e : spec.embeddings) embedding_names.insert(e.name);
  std::vector<int> readers(spec.layers.size() + 1, 0);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string where =
        absl::StrCat("model layer ", i, " (", l.name.empty() ? "no name" : l.name, "): ");
    if (l.name.empty()) return absl::InvalidArgumentError(where + "name is missing");
    if (embedding_names.count(l.name) > 0) {
      return absl::InvalidArgumentError(where + "the name is an embedding's too");
    }
    if (graph && l.name == "input") {
      return absl::InvalidArgumentError(
          where + "\"input\" names the model's input in a model whose layers name their inputs");
    }
    if (position.count(l.name) > 0) {
      return absl::InvalidArgumentError(where + "the name is used twice");
    }
    std::vector<int> reads;
    for (const std::string& name : l.inputs) {
      auto it = position.find(name);
      if (it == position.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "input \"", name, "\" is not a layer before this one",
                         embedding_names.count(name) > 0
                             ? " (the embeddings' output is the layers' input: name it \"input\")"
                             : " (nor \"input\", the model's input)"));
      }
      reads.push_back(it->second);
    }
    if (reads.empty()) reads.push_back(static_cast<int>(i));
    std::vector<Shape> in;
    for (int p : reads) {
      in.push_back(shapes[p]);
      ++readers[p];
    }
    absl::StatusOr<Shape> out = LayerOutputShapeForInputs(l, in);
    if (!out.ok()) return absl::InvalidArgumentError(where + std::string(out.status().message()));
    if (l.activation == Activation::kSoftmax && i + 1 < spec.layers.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "activation ", kSoftmaxOnlyLast));
    }
    if (l.has_kernel()) {
      auto kernel = ParseInitializerSpec(l.kernel_initializer, /*allow_glorot=*/true);
      if (!kernel.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "kernel initializer ", kernel.status().message()));
      }
      auto bias = ParseInitializerSpec(l.bias_initializer);
      if (!bias.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "bias initializer ", bias.status().message()));
      }
    }
    if (i + 1 == spec.layers.size()) {
      if (l.kind != LayerKind::kDense) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer gives the logits of ", LossName(spec.loss),
                         ": it must be dense, not ", LayerKindName(l.kind)));
      }
      // Keras's classifiers end in the loss's own function (softmax, or
      // sigmoid for one logit): the loss applies it here, on the logits.
      const Activation own = spec.binary() ? Activation::kSigmoid : Activation::kSoftmax;
      if (l.relu || (l.activation != Activation::kLinear && l.activation != own)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer gives the logits of ", LossName(spec.loss),
                         ": no activation (or ", ActivationName(own), ", which the loss applies)"));
      }
      if (spec.binary() && l.units != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "a sigmoid loss takes one logit, but the last layer has ", l.units, " units"));
      }
      if (!spec.binary() && l.units < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the last layer needs one unit per class, at least 2"));
      }
    }
    shapes.push_back(*std::move(out));
    inputs.push_back(std::move(reads));
    position[l.name] = static_cast<int>(i) + 1;
  }
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i) {
    if (readers[i + 1] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model layer ", i, " (", spec.layers[i].name,
          "): no later layer reads its output (only the last layer's is the model's)"));
    }
  }
  return ModelGraph(spec, *std::move(embeddings), std::move(shapes), std::move(inputs));
}

ModelGraph::ModelGraph(const NetworkSpec& spec, Embeddings embeddings, std::vector<Shape> shapes,
                       std::vector<std::vector<int>> inputs)
    : spec_(spec),
      embeddings_(std::move(embeddings)),
      shapes_(std::move(shapes)),
      inputs_(std::move(inputs)) {
  storage_.push_back(0);
  for (size_t l = 0; l < inputs_.size(); ++l) {
    sequential_ = sequential_ && inputs_[l] == std::vector<int>{static_cast<int>(l)};
    storage_.push_back(KindDef(spec.layers[l].kind).aliases_input() ? storage_[inputs_[l][0]]
                                                                    : static_cast<int>(l) + 1);
  }
  // Each variable's place in the job's initial stream (cluster/
  // initial_stream.h): uniform ones draw one value per element, in layer
  // order, kernel then bias; zeros draw nothing.
  int64_t draws = 0;
  auto initializer = [&draws](const InitializerSpec& init, float glorot_limit,
                              const Shape& shape) -> std::string {
    if (init.kind == InitializerSpec::Kind::kZeros) return "zeros";
    if (init.kind == InitializerSpec::Kind::kOnes) return "ones";
    const float limit =
        init.kind == InitializerSpec::Kind::kGlorotUniform ? glorot_limit : init.limit;
    const std::string spec = StreamInitializer({limit, draws});
    draws += ShapeSize(shape);
    return spec;
  };
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    int64_t kernel_at = -1, bias_at = -1;
    param_layer_.push_back(-1);
    // A frozen layer's variables (trainable: false) are never pushed.
    const VariableUpdate trained =
        l.trainable ? VariableUpdate::kOptimizer : VariableUpdate::kFrozen;
    const int number = layout_.num_layers();
    // Adds "<name>/<suffix>" to the flat array as this layer's; its offset.
    auto add = [&](const char* suffix, const Shape& shape, std::string init, ParamRole role,
                   VariableUpdate update) {
      const int64_t at = layout_.num_parameters();
      VariableDef def{absl::StrCat(l.name, "/", suffix), shape};
      def.initializer = std::move(init);
      def.update = update;
      layout_.AddFlat(std::move(def), number, role);
      return at;
    };
    const Shape& in = shapes_[inputs_[i][0]];
    const std::vector<LayerVariable> vars = KindDef(l.kind).Variables(l, in);
    for (const LayerVariable& v : vars) {
      std::string init;
      switch (v.init) {
        case LayerVariable::Init::kKernel: {
          int64_t fan_in = 0, fan_out = 0;
          KernelFans(l, in, &fan_in, &fan_out);
          const float glorot = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
          // Checked by Create.
          init = initializer(*ParseInitializerSpec(l.kernel_initializer, true), glorot, v.shape);
          break;
        }
        case LayerVariable::Init::kBias:
          init = initializer(*ParseInitializerSpec(l.bias_initializer), 0.0f, v.shape);
          break;
        case LayerVariable::Init::kZeros:
          init = "zeros";
          break;
        case LayerVariable::Init::kOnes:
          init = "ones";
          break;
      }
      // A moving statistic is added to by increments unless the layer is
      // frozen.
      const VariableUpdate update = !v.moving     ? trained
                                    : l.trainable ? VariableUpdate::kIncrement
                                                  : VariableUpdate::kFrozen;
      const int64_t at = add(v.suffix.c_str(), v.shape, std::move(init), v.role, update);
      if (kernel_at < 0) kernel_at = at;
      if (v.role == ParamRole::kBias) bias_at = at;
    }
    if (!vars.empty()) param_layer_.back() = number;
    kernel_at_.push_back(kernel_at);
    bias_at_.push_back(bias_at);
  }
  for (int i = 0; i < embeddings_.size(); ++i) {
    const EmbeddingBagSpec& e = embeddings_[i].spec();
    VariableDef table{e.table(), {e.vocabulary, e.dim}};
    table.embedding = true;
    table.consistency = spec_.sync_tables ? Consistency::Sync() : Consistency::Async();
    table.initializer = e.initializer;
    layout_.AddTable(std::move(table));
  }
}

std::vector<float> ModelGraph::InitialParameters(uint64_t seed) const {
  std::vector<float> params(num_parameters(), 0.0f);
  InitialStream stream(seed);
  for (size_t v = 0; v < variables().size(); ++v) {
    const VariableDef& def = variables()[v];
    if (def.embedding) continue;
    if (def.initializer == "ones") {
      std::fill_n(params.data() + offsets()[v], def.elements(), 1.0f);
      continue;
    }
    if (!IsStreamInitializer(def.initializer)) continue;                 // zeros
    const StreamPlace place = *ParseStreamInitializer(def.initializer);  // made above
    stream.Fill(place.first_draw, place.limit, def.elements(), params.data() + offsets()[v]);
  }
  return params;
}

absl::Status ModelGraph::CheckLabels(const int32_t* labels, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= spec_.num_classes()) {
      return absl::InvalidArgumentError(absl::StrCat("label ", labels[i], " of example ", i,
                                                     " is outside [0, ", spec_.num_classes(), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::model
