#include "model/model_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cluster/consistency.h"
#include "base/file_util.h"
#include "cluster/initializer_spec.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "data/idx_reader.h"
#include "data/input.h"
#include "data/record_survey.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "model/applications.h"
#include "model/layer_kind.h"
#include "model/network.h"
#include "proto/model_config.pb.h"

namespace pstrain::model {
namespace {

using google::protobuf::TextFormat;

// The values an enum field of the config takes (its UNSET value aside),
// found by the field's name anywhere under `type`: "valid, same".
std::string EnumValues(const google::protobuf::Descriptor* type, const std::string& field,
                       int depth = 0) {
  if (depth > 8) return "";
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = type->field(i);
    if (f->name() == field && f->enum_type() != nullptr) {
      std::vector<std::string> names;
      for (int v = 0; v < f->enum_type()->value_count(); ++v) {
        const google::protobuf::EnumValueDescriptor* value = f->enum_type()->value(v);
        if (value->number() != 0) names.push_back(value->name());
      }
      return absl::StrJoin(names, ", ");
    }
    if (f->message_type() != nullptr) {
      std::string found = EnumValues(f->message_type(), field, depth + 1);
      if (!found.empty()) return found;
    }
  }
  return "";
}

// Keeps the first error with its position (1-based, as editors count).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  // `text`: what is parsed, to point at an unknown value's first character
  // (the parser stops after it).
  explicit FirstError(const std::string& text) : text_(text) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    // An unknown value of a closed set: where it starts, and which values
    // the field takes.
    static const std::regex* const unknown =
        new std::regex(R"re(Unknown enumeration value of "([^"]*)" for field "([a-z_]+)"\.)re");
    std::smatch m;
    std::string values;
    if (std::regex_search(message, m, *unknown)) {
      values = EnumValues(v1::ModelConfig::descriptor(), m[2].str());
      const std::vector<absl::string_view> lines = absl::StrSplit(text_, '\n');
      if (line < static_cast<int>(lines.size())) {
        const size_t at = lines[line].substr(0, column).rfind(m[1].str());
        if (at != absl::string_view::npos) column = static_cast<int>(at);
      }
    }
    error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
    if (!values.empty()) absl::StrAppend(&error_, " It is one of: ", values, ".");
  }
  const std::string& error() const { return error_; }

 private:
  const std::string& text_;
  std::string error_;
};

// Builds "NAME:LINE:COLUMN: " prefixes from the parser's record of where each
// field was.
class Where {
 public:
  Where(const std::string& name, const TextFormat::ParseInfoTree* tree)
      : name_(name), tree_(tree) {}

  // The position of `field` (index `index` when repeated) in `tree`, or of
  // `fallback` when the field was not written.
  std::string At(const TextFormat::ParseInfoTree* tree, const google::protobuf::Descriptor* type,
                 const std::string& field, int index = -1, const std::string& fallback = "") const {
    const auto* f = type->FindFieldByName(field);
    if (tree != nullptr && f != nullptr) {
      // A repeated field: where its first value is, unless told which.
      const auto loc = tree->GetLocation(f, f->is_repeated() && index < 0 ? 0 : index);
      if (loc.line >= 0) return absl::StrCat(name_, ":", loc.line + 1, ":", loc.column + 1, ": ");
    }
    if (!fallback.empty()) return fallback;
    return absl::StrCat(name_, ": ");
  }
  const TextFormat::ParseInfoTree* root() const { return tree_; }

 private:
  const std::string name_;
  const TextFormat::ParseInfoTree* tree_;
};

absl::Status Bad(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, what));
}

absl::StatusOr<std::vector<VariableDef>> ParseVariables(const v1::ModelConfig& config,
                                                        const Where& where) {
  const auto* type = v1::ModelConfig::descriptor();
  std::vector<VariableDef> out;
  std::set<std::string> names;
  for (int i = 0; i < config.variable_size(); ++i) {
    const v1::VariableConfig& v = config.variable(i);
    const std::string at = absl::StrCat(where.At(where.root(), type, "variable", i), "variable ", i,
                                        " (", v.name().empty() ? "no name" : v.name(), "): ");
    if (v.name().empty()) return Bad(at, "name is missing");
    if (!names.insert(v.name()).second) return Bad(at, "the name is used twice");
    if (v.shape_size() == 0) return Bad(at, "shape is missing");
    for (int64_t d : v.shape()) {
      if (d < 1) return Bad(at, absl::StrCat("shape has a dimension of ", d));
    }
    if (v.embedding() && v.shape_size() != 2) {
      return Bad(at, "an embedding table's shape is [vocabulary, dim]");
    }
    std::optional<Consistency> consistency;
    if (!v.consistency().empty()) {
      auto c = ParseConsistency(v.consistency());
      if (!c.ok()) return Bad(at, c.status().message());
      consistency = *c;
    }
    if (!v.initializer().empty()) {  // empty: the PS's default
      auto init = ParseInitializerSpec(v.initializer());
      if (!init.ok()) return Bad(at, absl::StrCat("initializer ", init.status().message()));
    }
    VariableDef def{v.name(), {v.shape().begin(), v.shape().end()}};
    def.embedding = v.embedding();
    def.consistency = consistency;
    def.initializer = v.initializer();
    out.push_back(std::move(def));
  }
  return out;
}

// The type a layer entry gives: its field's name, or an error.
absl::StatusOr<std::string> LayerType(const v1::LayerConfig& l) {
  std::vector<std::string> given;
  const auto* reflection = l.GetReflection();
  const auto* type = v1::LayerConfig::descriptor();
  for (int f = 0; f < type->field_count(); ++f) {
    const auto* field = type->field(f);
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
        reflection->HasField(l, field)) {
      given.push_back(field->name());
    }
  }
  if (given.size() == 1) return given[0];
  if (given.empty()) {
    std::vector<std::string> kinds;
    for (const LayerKindDef* def : AllKindDefs()) kinds.push_back(def->name());
    return absl::InvalidArgumentError(absl::StrCat("no layer type is given (",
                                                   absl::StrJoin(kinds, ", "),
                                                   ", embedding or embedding_bag)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("gives both ", given[0], " and ", given[1], ": one type per layer"));
}

// For ids_from "feature:NAME": where the feature's ids lie in the id layout
// and how many there are; the errors say what does not fit.
absl::Status ResolveIdFeature(const data::InputSpec& input, EmbeddingBagSpec* spec) {
  if (input.format == data::InputFormat::kIdx) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", spec->ids_from,
                     "\" needs an input block with id features (format "
                     "\"tfrecord\", \"csv\" or \"tsv\"); the IDX files have none"));
  }
  int64_t offset = 0;
  for (const data::FeatureDef& f : input.features.features) {
    if (f.name == spec->feature()) {
      if (f.is_dense()) {
        return absl::InvalidArgumentError(absl::StrCat("feature \"", f.name, "\" is float: an ",
                                                       spec->kind(),
                                                       " reads an int64 or string feature (ids)"));
      }
      const int64_t range = f.hash_buckets > 0 ? f.hash_buckets + 1 : f.vocabulary;
      if (range > spec->vocabulary) {
        return absl::InvalidArgumentError(absl::StrCat(spec->vocabulary,
                                                       " is smaller than the vocabulary of ",
                                                       range, " ids feature \"", f.name,
                                                       "\" gives"));
      }
      spec->ids_offset = offset;
      spec->ids_length = f.width();
      return absl::OkStatus();
    }
    if (!f.is_dense()) offset += f.width();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the input has no feature \"", spec->feature(), "\""));
}

// input_shape and input_dim: checked against each other and their bounds,
// into spec->input_shape and spec->input_dim.
absl::Status ParseInputWidth(const v1::ModelConfig& config, const Where& where,
                             NetworkSpec* spec) {
  const auto* type = v1::ModelConfig::descriptor();
  if (config.input_shape_size() > 0) {
    Shape shape(config.input_shape().begin(), config.input_shape().end());
    const std::string at = where.At(where.root(), type, "input_shape", 0);
    for (int64_t d : shape) {
      if (d < 1 || d > (1 << 24)) {
        return Bad(at, absl::StrCat("input_shape ", ShapeString(shape),
                                    " has a dimension outside 1..16777216"));
      }
    }
    // Multiplied with a bound, so that no product overflows.
    int64_t size = 1;
    for (int64_t d : shape) size = std::min<int64_t>(size * d, int64_t{1} << 25);
    if (size > (1 << 24)) {
      return Bad(at, absl::StrCat("input_shape ", ShapeString(shape),
                                  " holds more than 16777216 values"));
    }
    if (config.has_input_dim() && size != config.input_dim()) {
      return Bad(at, absl::StrCat("input_shape ", ShapeString(shape), " holds ", size,
                                  " values but input_dim is ", config.input_dim()));
    }
    spec->input_shape = std::move(shape);
  }
  if (!config.has_input_dim() && spec->input_shape.empty()) {
    return Bad(where.At(where.root(), type, "layer", 0),
               "input_dim is missing (the width of each example, 784 for Fashion-MNIST)");
  }
  const int64_t input_dim =
      config.has_input_dim() ? config.input_dim() : ShapeSize(spec->input_shape);
  // A model whose first layer reads id features may have no float input.
  const bool ids_first =
      config.layer_size() > 0 &&
      absl::StartsWith(config.layer(0).has_embedding() ? config.layer(0).embedding().ids_from()
                                                       : config.layer(0).embedding_bag().ids_from(),
                       "feature:");
  if (input_dim < (ids_first ? 0 : 1) || input_dim > (1 << 24)) {
    return Bad(where.At(where.root(), type, "input_dim"),
               absl::StrCat("input_dim ", input_dim, " must be in 1..16777216"));
  }
  spec->input_dim = static_cast<int>(input_dim);
  return absl::OkStatus();
}

// One layer entry as its errors name it: "NAME:LINE:COL: layer I (NAME): "
// at the layer, and at one of its type's fields.
struct LayerEntry {
  const v1::LayerConfig* config = nullptr;
  int index = 0;
  bool last = false;     // the logits layer
  std::string kind;      // the type's field name: "dense", "conv2d", ...
  std::string name;      // as given, or as Keras names it
  std::string at_layer;  // "NAME:LINE:COL: " of the layer
  std::string what;      // "layer I (NAME): "
  const Where* where = nullptr;
  const TextFormat::ParseInfoTree* tree = nullptr;  // the type's block
  const google::protobuf::FieldDescriptor* field = nullptr;

  // "NAME:LINE:COL: layer I (NAME): TYPE.FIELD " at the field, or at the
  // layer when the field was not written.
  std::string At(const std::string& f) const {
    return where->At(tree, field->message_type(), f, -1, at_layer) + what + kind + "." + f + " ";
  }
  // The same prefix without the field's name after it.
  std::string AtField(const std::string& f) const {
    return where->At(tree, field->message_type(), f, -1, at_layer) + what;
  }
  absl::Status Missing(const std::string& f, const std::string& hint = "") const {
    return Bad(at_layer, what + kind + "." + f + " is missing" + hint);
  }
};

// An embedding or embedding_bag layer: checked, resolved against the
// input's features, appended to spec->embeddings; *shape becomes what the
// embeddings give together.
absl::Status ParseEmbeddingLayer(const LayerEntry& e, const data::InputSpec& input,
                                 NetworkSpec* spec, Shape* shape) {
  const bool sequence = e.kind == "embedding";
  const v1::EmbeddingBagLayer& b = e.config->embedding_bag();
  const v1::EmbeddingLayer& q = e.config->embedding();
  const int64_t vocabulary = sequence ? q.vocabulary() : b.vocabulary();
  const int64_t dim = sequence ? q.dim() : b.dim();
  const std::string& ids_from = sequence ? q.ids_from() : b.ids_from();
  if (!spec->layers.empty()) {
    return Bad(e.at_layer, e.what + "an " + e.kind +
                               " layer must come before every other kind of layer: it reads "
                               "the input's ids");
  }
  if (!spec->input_shape.empty()) {
    return Bad(e.where->At(e.where->root(), v1::ModelConfig::descriptor(), "input_shape", 0),
               "input_shape is for the first layer's input; an " + e.kind +
                   " reads the input's ids");
  }
  if (vocabulary == 0) {
    return e.Missing("vocabulary",
                     " (or leave it to the data: a vocab.txt in --data_dir gives its words + 2)");
  }
  if (vocabulary < 1 || vocabulary > (int64_t{1} << 40)) {
    return Bad(e.At("vocabulary"), absl::StrCat(vocabulary, " must be in 1..2^40"));
  }
  if (dim == 0) return e.Missing("dim");
  if (dim < 1 || dim > 4096) return Bad(e.At("dim"), absl::StrCat(dim, " must be in 1..4096"));
  if (ids_from.empty()) {
    return e.Missing("ids_from", sequence ? " (feature:NAME)"
                                          : " (feature:NAME or pixel_buckets:B)");
  }
  EmbeddingBagSpec bag;
  bag.name = e.name;
  bag.vocabulary = vocabulary;
  bag.dim = static_cast<int>(dim);
  bag.ids_from = ids_from;
  bag.sequence = sequence;
  if (sequence) {
    bag.mask_zero = q.mask_zero();
    if (!q.initializer().empty()) bag.initializer = q.initializer();
  } else {
    if (b.combiner() == v1::sum) bag.combiner = EmbeddingBagSpec::Combiner::kSum;
    if (!b.initializer().empty()) bag.initializer = b.initializer();
  }
  if (bag.from_feature()) {
    if (absl::Status s = ResolveIdFeature(input, &bag); !s.ok()) {
      return Bad(absl::StrContains(s.message(), " is smaller than the vocabulary of ")
                     ? e.At("vocabulary")
                     : e.At("ids_from"),
                 s.message());
    }
    if (sequence && q.input_length() != 0 && q.input_length() != bag.ids_length) {
      return Bad(e.At("input_length"),
                 absl::StrCat(q.input_length(), " is not the length of feature \"",
                              bag.feature(), "\" (", bag.ids_length, ")"));
    }
  }
  // The rest (combiner, ids_from's form, a vocabulary too small for its
  // ids, the initializer), at the field the layer names.
  auto checked = EmbeddingBag::Create(bag, spec->input_dim);
  if (!checked.ok()) {
    // "KIND NAME: FIELD what" -> at FIELD: "what".
    absl::string_view m = checked.status().message();
    absl::ConsumePrefix(&m, absl::StrCat(e.kind, " ", e.name, ": "));
    for (const char* f : {"ids_from", "vocabulary", "initializer"}) {
      if (absl::ConsumePrefix(&m, absl::StrCat(f, " "))) return Bad(e.At(f), m);
    }
    return Bad(e.at_layer, e.what + std::string(m));
  }
  spec->embeddings.push_back(bag);
  // Several embeddings: side by side (model/embeddings.h).
  auto together = Embeddings::Create(spec->embeddings, spec->input_dim);
  if (!together.ok()) return Bad(e.at_layer, e.what + std::string(together.status().message()));
  *shape = together->output_shape();
  return absl::OkStatus();
}

// A layer's entry as its kind reads it (model/layer_kind.h).
class KindEntry final : public LayerConfigEntry {
 public:
  explicit KindEntry(const LayerEntry& e) : e_(e) {}
  const google::protobuf::Message& message() const override {
    return e_.config->GetReflection()->GetMessage(*e_.config, e_.field);
  }
  int index() const override { return e_.index; }
  bool last() const override { return e_.last; }
  absl::Status Missing(const std::string& field, const std::string& hint) const override {
    return e_.Missing(field, hint);
  }
  absl::Status Bad(const std::string& field, absl::string_view what) const override {
    return pstrain::model::Bad(e_.At(field), what);
  }

 private:
  const LayerEntry& e_;
};

// A layer other than an embedding, its fields checked one by one (by its
// kind, model/kinds/); the shape it is given is checked by the caller.
absl::StatusOr<LayerSpec> ParseLayer(const LayerEntry& e, const Shape& shape) {
  const v1::LayerConfig& l = *e.config;
  const LayerKindDef* def = FindKindDef(e.kind);
  if (def == nullptr) {
    return Bad(e.at_layer, absl::StrCat(e.what, e.kind, " has no definition in model/kinds/"));
  }
  LayerSpec layer;
  layer.name = e.name;
  layer.kind = def->kind();
  PSTRAIN_RETURN_IF_ERROR(def->ParseConfig(KindEntry(e), shape, &layer));
  layer.inputs.assign(l.inputs().begin(), l.inputs().end());
  layer.trainable = !l.has_trainable() || l.trainable();
  return layer;
}

// The last layer gives the logits: dense, no activation, as many units as
// the loss takes.
absl::Status CheckLogitsLayer(const LayerEntry& e, const LayerSpec& layer,
                              const NetworkSpec& spec) {
  if (layer.kind != LayerKind::kDense) {
    return Bad(e.at_layer, absl::StrCat(e.what, "the last layer gives the logits of ",
                                        LossName(spec.loss), ": it must be dense, not ", e.kind));
  }
  const Activation own = spec.binary() ? Activation::kSigmoid : Activation::kSoftmax;
  if (layer.relu || (layer.activation != Activation::kLinear && layer.activation != own)) {
    return Bad(e.At("activation"),
               absl::StrCat("must be empty or ", ActivationName(own),
                            ": the last layer gives the logits of ", LossName(spec.loss)));
  }
  if (spec.binary() && layer.units != 1) {
    return Bad(e.At("units"), absl::StrCat(layer.units,
                                           " must be 1: a sigmoid loss takes one "
                                           "logit (labels 0 and 1)"));
  }
  if (!spec.binary() && layer.units < 2) {
    return Bad(e.At("units"), "must be at least 2: the last layer has one unit per class");
  }
  return absl::OkStatus();
}

// Layer i of the config as its errors name it; `type_index` counts the
// layers of each type so far (Keras's default names: dense_0, dense_1).
absl::StatusOr<LayerEntry> EntryFor(const v1::ModelConfig& config, int i, const Where& where,
                                    int embedding_number, std::map<std::string, int>* type_index) {
  const auto* type = v1::ModelConfig::descriptor();
  LayerEntry e;
  e.config = &config.layer(i);
  e.index = i;
  e.where = &where;
  e.at_layer = where.At(where.root(), type, "layer", i);
  absl::StatusOr<std::string> kind = LayerType(*e.config);
  // Embeddings are named as Keras names them: embedding, embedding_1, ...
  e.name = !e.config->name().empty() ? e.config->name()
           : !kind.ok()              ? absl::StrCat("layer_", i)
           : *kind == "embedding_bag" || *kind == "embedding"
               ? (embedding_number == 0 ? std::string("embedding")
                                        : absl::StrCat("embedding_", embedding_number))
               : absl::StrCat(*kind, "_", (*type_index)[*kind]);
  e.what = absl::StrCat("layer ", i, " (", e.name, "): ");
  if (!kind.ok()) return Bad(e.at_layer, e.what + std::string(kind.status().message()));
  e.kind = *kind;
  ++(*type_index)[e.kind];
  const TextFormat::ParseInfoTree* layer_tree =
      where.root() == nullptr ? nullptr
                              : where.root()->GetTreeForNested(type->FindFieldByName("layer"), i);
  e.field = v1::LayerConfig::descriptor()->FindFieldByName(e.kind);
  e.tree = layer_tree == nullptr ? nullptr : layer_tree->GetTreeForNested(e.field, -1);
  return e;
}

absl::StatusOr<NetworkSpec> ParseLayers(const v1::ModelConfig& config, const Where& where,
                                        const data::InputSpec& input) {
  const auto* type = v1::ModelConfig::descriptor();
  NetworkSpec spec;
  spec.loss = config.loss() == v1::sigmoid_cross_entropy ? Loss::kSigmoidCrossEntropy
                                                         : Loss::kSoftmaxCrossEntropy;
  PSTRAIN_RETURN_IF_ERROR(ParseInputWidth(config, where, &spec));
  Shape shape = spec.input_shape.empty() ? Shape{spec.input_dim} : spec.input_shape;
  std::map<std::string, int> type_index;
  // A graph's layers name what they read: each earlier layer's output
  // shape by name, "input" the model's (after the embeddings).
  bool graph = false;
  for (const v1::LayerConfig& l : config.layer()) graph = graph || l.inputs_size() > 0;
  std::map<std::string, Shape> shape_of;
  std::set<std::string> read;         // the names some layer reads
  std::vector<std::string> at_layer;  // per spec.layers entry, where it is
  for (int i = 0; i < config.layer_size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(
        LayerEntry e,
        EntryFor(config, i, where, static_cast<int>(spec.embeddings.size()), &type_index));
    e.last = i + 1 == config.layer_size();
    if (e.kind == "embedding_bag" || e.kind == "embedding") {
      if (e.config->inputs_size() > 0) {
        return Bad(e.at_layer, e.what + "inputs: an embedding reads the input's ids, not layers");
      }
      PSTRAIN_RETURN_IF_ERROR(ParseEmbeddingLayer(e, input, &spec, &shape));
      continue;
    }
    if (graph && shape_of.empty()) shape_of["input"] = shape;
    if (graph && e.name == "input") {
      return Bad(e.at_layer, e.what +
                                 "\"input\" names the model's input in a model whose layers "
                                 "name their inputs: give this layer another name");
    }
    std::vector<Shape> ins;
    for (const std::string& name : e.config->inputs()) {
      auto it = shape_of.find(name);
      if (it == shape_of.end()) {
        return Bad(e.at_layer,
                   absl::StrCat(e.what, "inputs: \"", name,
                                "\" is not a layer before this one (nor \"input\", the model's "
                                "input)"));
      }
      ins.push_back(it->second);
    }
    if (ins.empty()) ins.push_back(shape);
    PSTRAIN_ASSIGN_OR_RETURN(LayerSpec layer, ParseLayer(e, ins[0]));
    const std::string shape_field = KindDef(layer.kind).shape_field();
    absl::StatusOr<Shape> out = LayerOutputShapeForInputs(layer, ins);
    if (!out.ok()) {
      const bool rank = absl::StrContains(out.status().message(), " needs a ");
      return Bad(rank || shape_field.empty() ? e.at_layer + e.what : e.AtField(shape_field),
                 out.status().message());
    }
    if (i + 1 == config.layer_size()) PSTRAIN_RETURN_IF_ERROR(CheckLogitsLayer(e, layer, spec));
    shape = *std::move(out);
    if (graph) shape_of.emplace(e.name, shape);
    for (const std::string& name : layer.inputs) read.insert(name);
    if (layer.inputs.empty() && !spec.layers.empty()) read.insert(spec.layers.back().name);
    spec.layers.push_back(layer);
    at_layer.push_back(e.at_layer);
  }
  for (size_t i = 0; graph && i + 1 < spec.layers.size(); ++i) {
    if (read.count(spec.layers[i].name) == 0) {
      return Bad(at_layer[i], absl::StrCat("layer ", i + spec.embeddings.size(), " (",
                                           spec.layers[i].name,
                                           "): no later layer reads its output (name it in a "
                                           "later layer's inputs; only the last layer's output "
                                           "is the model's)"));
    }
  }
  if (spec.layers.empty()) {
    return Bad(where.At(where.root(), type, "layer", 0),
               "the model has no dense layer: the last one gives the logits");
  }
  std::set<std::string> names;
  for (const EmbeddingBagSpec& e : spec.embeddings) names.insert(e.name);
  const int first = static_cast<int>(spec.embeddings.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (!names.insert(spec.layers[i].name).second) {
      const int index = static_cast<int>(i) + first;
      return Bad(
          where.At(where.root(), type, "layer", index),
          absl::StrCat("layer ", index, " (", spec.layers[i].name, "): the name is used twice"));
    }
  }
  return spec;
}

absl::Status ParseInput(const v1::ModelConfig& config, const Where& where, data::InputSpec* in) {
  const auto* type = v1::ModelConfig::descriptor();
  const v1::InputConfig& c = config.input();
  const TextFormat::ParseInfoTree* tree =
      where.root() == nullptr ? nullptr
                              : where.root()->GetTreeForNested(type->FindFieldByName("input"), -1);
  const std::string fallback = where.At(where.root(), type, "input");
  // "NAME:LINE:COLUMN: input: " at the field.
  auto iat = [&](const std::string& field, int index = -1) {
    return where.At(tree, v1::InputConfig::descriptor(), field, index, fallback) + "input: ";
  };
  if (absl::Status s = data::SetInputFormat(
          c.format() == v1::FORMAT_UNSET ? "idx" : v1::InputFormat_Name(c.format()), in);
      !s.ok()) {
    return Bad(iat("format"), s.message());
  }
  if (in->format == data::InputFormat::kIdx) {
    if (!c.train_files().empty() || !c.test_files().empty() || c.feature_size() > 0 ||
        c.shuffle_buffer() != 0) {
      return Bad(fallback,
                 "input: train_files, test_files, feature and shuffle_buffer are for format "
                 "\"tfrecord\", \"csv\" or \"tsv\" (the IDX files of the data directory need "
                 "none)");
    }
  }
  const bool csv = in->format == data::InputFormat::kCsv;
  if (!csv && (!c.field_delim().empty() || c.has_header() || c.column_size() > 0)) {
    return Bad(fallback, "input: field_delim, header and column are for format \"csv\" or \"tsv\"");
  }
  if (in->format == data::InputFormat::kIdx) return absl::OkStatus();
  if (csv) {
    if (!c.field_delim().empty()) {
      const char d = c.field_delim()[0];
      if (c.field_delim().size() != 1 || d == '"' || d == '\n' || d == '\r') {
        return Bad(iat("field_delim"),
                   absl::StrCat("field_delim \"", absl::CEscape(c.field_delim()),
                                "\" must be one character, not a quote or a line end"));
      }
      in->csv.dialect.delimiter = d;
    }
    in->csv.columns.assign(c.column().begin(), c.column().end());
    in->csv.header = c.has_header() ? c.header() : c.column_size() == 0;
    if (!in->csv.header && c.column_size() == 0) {
      return Bad(iat("header"),
                 "header: false but no column names are given: list them with column: \"NAME\"");
    }
  }
  const bool tfds = in->format == data::InputFormat::kTfds;
  if (!tfds && (!c.train_split().empty() || !c.test_split().empty())) {
    return Bad(fallback,
               "input: train_split and test_split slice a TensorFlow Datasets directory (format "
               "\"tfds\"); files are named by train_files and test_files");
  }
  if (tfds) {
    if (!c.train_files().empty() || !c.test_files().empty()) {
      return Bad(fallback,
                 "input: format \"tfds\" reads the shards its dataset_info.json lists (the data "
                 "directory is the dataset's version directory): name splits with train_split "
                 "and test_split, not train_files and test_files");
    }
    if (!c.train_split().empty()) in->train_split = c.train_split();
    if (!c.test_split().empty()) in->test_split = c.test_split();
  } else if (c.train_files().empty()) {
    return Bad(fallback, "input.train_files is missing (a glob)");
  } else if (c.test_files().empty()) {
    return Bad(fallback,
               "input.test_files is missing (the examples the chief and evaluator score)");
  }
  if (c.feature_size() == 0) return Bad(fallback, "input.feature is missing: no feature is read");
  in->train_files = c.train_files();
  in->test_files = c.test_files();
  if (c.compression() == v1::NONE) in->compression = data::Compression::kNone;
  if (c.compression() == v1::GZIP) in->compression = data::Compression::kGzip;
  in->skip_bad_records = c.skip_bad_records();
  if (c.shuffle_buffer() < 0 || c.shuffle_buffer() > (int64_t{1} << 30)) {
    return Bad(iat("shuffle_buffer"),
               absl::StrCat("shuffle_buffer ", c.shuffle_buffer(),
                            " is not in 0..2^30 (0 holds the training files in memory)"));
  }
  in->shuffle_buffer = c.shuffle_buffer();
  if (!c.label().empty()) in->features.label = c.label();
  for (int i = 0; i < c.feature_size(); ++i) {
    const v1::FeatureConfig& f = c.feature(i);
    data::FeatureDef def;
    def.name = f.name();
    if (!f.type().empty()) {
      auto t = data::ParseFeatureType(f.type());
      if (!t.ok()) return Bad(iat("feature", i), t.status().message());
      def.type = *t;
    }
    if (f.has_length()) def.length = f.length();
    def.max_len = f.max_len();
    def.has_default = f.has_default_value();
    def.default_value = f.default_value();
    def.vocabulary_file = f.vocabulary_file();
    def.hash_buckets = f.hash_buckets();
    def.vocabulary = f.vocabulary();
    def.pad_front = f.padding() == v1::pre;
    def.truncate_front = f.truncating() == v1::pre;
    if (!f.column().empty() && !csv) {
      return Bad(iat("feature", i),
                 absl::StrCat("feature \"", f.name(), "\": column is for CSV or TSV input"));
    }
    def.column = f.column();
    if (f.has_scale()) def.scale = f.scale();
    if (f.has_offset()) def.offset = f.offset();
    if (f.image_shape_size() > 0) {
      def.image_shape.assign(f.image_shape().begin(), f.image_shape().end());
      // Its length unless the config says one (checked against it).
      if (!f.has_length() && def.image_shape.size() == 3) {
        def.length = def.image_shape[0] * def.image_shape[1] * def.image_shape[2];
      }
    }
    if (!f.resize().empty() || f.image_shape_size() > 0) {
      if (!f.resize().empty() && f.image_shape_size() == 0) {
        return Bad(iat("feature", i),
                   absl::StrCat("feature \"", f.name(), "\": resize needs an image_shape"));
      }
      auto resize = data::ParseResizeMethod(f.resize());
      if (!resize.ok()) {
        return Bad(iat("feature", i),
                   absl::StrCat("feature \"", f.name(), "\": ", resize.status().message()));
      }
      def.resize = *resize;
    }
    if (!f.decode().empty()) {
      if (csv) {
        return Bad(iat("feature", i),
                   absl::StrCat("feature \"", f.name(),
                                "\": decode is for TFRecord input (a CSV cell is a value)"));
      }
      auto decode = data::ParseFeatureDecode(f.decode());
      if (!decode.ok()) {
        return Bad(iat("feature", i),
                   absl::StrCat("feature \"", f.name(), "\": ", decode.status().message()));
      }
      def.decode = *decode;
    }
    in->features.features.push_back(std::move(def));
    // Checked as it grows, so an error names the feature that caused it.
    if (absl::Status s = data::CheckFeatureSpec(in->features); !s.ok()) {
      return Bad(iat("feature", i), s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status ParseJob(const v1::ModelConfig& config, const Where& where, JobSpec* job) {
  const auto* type = v1::ModelConfig::descriptor();
  auto at = [&](const std::string& field) {
    return where.At(where.root(), type, field) + field + " ";
  };
  if (config.has_batch_size()) {
    if (config.batch_size() < 1 || config.batch_size() > 65536) {
      return Bad(at("batch_size"), absl::StrCat(config.batch_size(), " must be in 1..65536"));
    }
    job->batch_size = static_cast<int>(config.batch_size());
  }
  if (config.has_epochs()) {
    if (config.epochs() < 1 || config.epochs() > 100000) {
      return Bad(at("epochs"), absl::StrCat(config.epochs(), " must be in 1..100000"));
    }
    job->epochs = static_cast<int>(config.epochs());
  }
  if (config.has_steps()) {
    if (config.steps() < 0) {
      return Bad(at("steps"), absl::StrCat(config.steps(), " must be 0 (epochs decide) or more"));
    }
    job->max_steps = config.steps();
  }
  if (config.has_seed()) {
    if (config.seed() < 0) return Bad(at("seed"), absl::StrCat(config.seed(), " must be >= 0"));
    job->seed = static_cast<uint64_t>(config.seed());
  }
  if (!config.consistency().empty()) {
    auto c = ParseConsistency(config.consistency());
    if (!c.ok()) return Bad(where.At(where.root(), type, "consistency"), c.status().message());
    job->consistency = *c;
  }
  if (config.has_replicas_to_aggregate()) {
    if (config.replicas_to_aggregate() < 0 || config.replicas_to_aggregate() > 4096) {
      return Bad(at("replicas_to_aggregate"),
                 absl::StrCat(config.replicas_to_aggregate(), " must be from 0 (all) to 4096"));
    }
    job->replicas_to_aggregate = static_cast<int>(config.replicas_to_aggregate());
  }
  if (config.has_optimizer()) {
    const v1::OptimizerSettings& o = config.optimizer();
    const TextFormat::ParseInfoTree* tree =
        where.root() == nullptr
            ? nullptr
            : where.root()->GetTreeForNested(type->FindFieldByName("optimizer"), -1);
    const std::string fallback = where.At(where.root(), type, "optimizer");
    auto oat = [&](const std::string& field) {
      return where.At(tree, v1::OptimizerSettings::descriptor(), field, -1, fallback) +
             "optimizer." + field + " ";
    };
    OptimizerSpec& opt = job->optimizer;
    if (o.name().empty())
      return Bad(fallback,
                 "optimizer.name is missing (sgd, momentum, adagrad, adam, nadam or ftrl)");
    if (o.name() != "sgd" && o.name() != "momentum" && o.name() != "adagrad" &&
        o.name() != "adam" && o.name() != "nadam" && o.name() != "ftrl") {
      return Bad(
          oat("name"),
          absl::StrCat("\"", o.name(), "\" is not sgd, momentum, adagrad, adam, nadam or ftrl"));
    }
    opt.name = o.name();
    opt.dense_table_updates = o.table_updates() == v1::dense;
    if (opt.dense_table_updates && opt.name == "ftrl") {
      return Bad(oat("table_updates"),
                 "dense is not for ftrl: FTRL moves only the rows a batch names, in TensorFlow too");
    }
    if (o.has_learning_rate()) {
      if (!(o.learning_rate() > 0) || o.learning_rate() > 100) {
        return Bad(oat("learning_rate"), absl::StrCat(o.learning_rate(), " must be in (0, 100]"));
      }
      opt.learning_rate = o.learning_rate();
    }
    if (o.has_momentum()) {
      if (!(o.momentum() >= 0 && o.momentum() < 1)) {
        return Bad(oat("momentum"), absl::StrCat(o.momentum(), " must be in [0, 1)"));
      }
      opt.momentum = o.momentum();
    }
    if (o.has_nesterov()) opt.nesterov = o.nesterov();
    for (auto [field, has, value, target] :
         {std::make_tuple("beta1", o.has_beta1(), o.beta1(), &opt.beta1),
          std::make_tuple("beta2", o.has_beta2(), o.beta2(), &opt.beta2)}) {
      if (!has) continue;
      if (!(value >= 0 && value < 1))
        return Bad(oat(field), absl::StrCat(value, " must be in [0, 1)"));
      *target = value;
    }
    for (auto [field, has, value, target] :
         {std::make_tuple("epsilon", o.has_epsilon(), o.epsilon(), &opt.epsilon),
          std::make_tuple("initial_accumulator", o.has_initial_accumulator(),
                          o.initial_accumulator(), &opt.initial_accumulator)}) {
      if (!has) continue;
      if (!(value > 0)) return Bad(oat(field), absl::StrCat(value, " must be positive"));
      *target = value;
    }
    for (auto [field, has, value, target] : {std::make_tuple("l1", o.has_l1(), o.l1(), &opt.l1),
                                             std::make_tuple("l2", o.has_l2(), o.l2(), &opt.l2)}) {
      if (!has) continue;
      if (!(value >= 0) || !std::isfinite(value)) {
        return Bad(oat(field), absl::StrCat(value, " must be 0 or more"));
      }
      *target = value;
    }
    if (o.has_schedule()) {
      const v1::LearningRateSchedule& sc = o.schedule();
      switch (sc.kind_case()) {
        case v1::LearningRateSchedule::kExponentialDecay:
        case v1::LearningRateSchedule::kInverseTimeDecay: {
          const bool exponential = sc.has_exponential_decay();
          const v1::DecaySchedule& d =
              exponential ? sc.exponential_decay() : sc.inverse_time_decay();
          opt.schedule = exponential ? "exponential_decay" : "inverse_time_decay";
          opt.decay_steps = d.decay_steps();
          opt.decay_rate = d.decay_rate();
          opt.staircase = d.staircase();
          break;
        }
        case v1::LearningRateSchedule::kCosineDecay:
          opt.schedule = "cosine_decay";
          opt.decay_steps = sc.cosine_decay().decay_steps();
          opt.alpha = sc.cosine_decay().alpha();
          break;
        case v1::LearningRateSchedule::kPiecewiseConstant:
          opt.schedule = "piecewise_constant";
          opt.boundaries.assign(sc.piecewise_constant().boundaries().begin(),
                                sc.piecewise_constant().boundaries().end());
          opt.values.assign(sc.piecewise_constant().values().begin(),
                            sc.piecewise_constant().values().end());
          break;
        case v1::LearningRateSchedule::KIND_NOT_SET:
          return Bad(oat("schedule"),
                     "names no schedule (exponential_decay, inverse_time_decay, cosine_decay or "
                     "piecewise_constant)");
      }
      if (absl::Status s = CheckSchedule(opt); !s.ok()) return Bad(oat("schedule"), s.message());
    }
    if (o.has_clipnorm() && o.has_clipvalue()) {
      return Bad(oat("clipvalue"), "give clipnorm or clipvalue, not both (as Keras)");
    }
    for (auto [field, has, value, target] :
         {std::make_tuple("clipnorm", o.has_clipnorm(), o.clipnorm(), &opt.clipnorm),
          std::make_tuple("clipvalue", o.has_clipvalue(), o.clipvalue(), &opt.clipvalue)}) {
      if (!has) continue;
      if (!(value > 0) || !std::isfinite(value)) {
        return Bad(oat(field), absl::StrCat(value, " must be a positive finite number"));
      }
      *target = value;
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

std::string UnquoteEnumValues(std::string text) {
  // `FIELD: "value"` -> `FIELD:  value ` (same length: the parser's line and
  // column numbers stay those of the file), for the fields that are enums;
  // `FIELD: ""` (once "unset") -> blanks.
  static const std::regex* const quoted = new std::regex(
      R"re(\b(padding|truncating|table_updates|activation|combiner|loss|format|compression)(\s*:\s*)"([A-Za-z_][A-Za-z0-9_]*)?")re");
  std::string out;
  size_t copied = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), *quoted), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(text, copied, m.position(0) - copied);
    if (m[3].length() == 0) {
      out.append(m.length(0), ' ');
    } else {
      out.append(m[1].str()).append(m[2].str()).append(" ").append(m[3].str()).append(" ");
    }
    copied = m.position(0) + m.length(0);
  }
  out.append(text, copied, std::string::npos);
  return out;
}

}  // namespace

std::vector<int64_t> IdxImageShapeOf(const std::string& data_dir) {
  absl::StatusOr<data::SplitFiles> files = data::FindSplitFiles(data_dir, data::Split::kTrain);
  if (!files.ok() || files->images.empty()) return {};
  absl::StatusOr<std::vector<int64_t>> dims = data::ReadIdxDims(files->images[0]);
  if (!dims.ok() || dims->size() != 3) return {};
  return {(*dims)[1], (*dims)[2], 1};
}

DataSizes DataSizesOf(const std::string& data_dir) {
  auto lines = [&data_dir](const char* file) -> int64_t {
    absl::StatusOr<std::string> text = ReadFile(data_dir + "/" + file);
    if (!text.ok()) return 0;
    int64_t n = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      n += !absl::StripAsciiWhitespace(line).empty();
    }
    return n;
  };
  DataSizes sizes;
  if (const int64_t words = lines("vocab.txt"); words > 0) sizes.vocabulary = words + 2;
  sizes.classes = lines("labels.txt");
  return sizes;
}

namespace {

// `sizes` written into the config where it leaves them out (or everywhere
// they apply, replacing), before it is checked.
void ApplyDataSizes(const DataSizes& sizes, v1::ModelConfig* config) {
  if (sizes.vocabulary > 0) {
    for (v1::FeatureConfig& f : *config->mutable_input()->mutable_feature()) {
      if (f.type() != "int64" || !f.vocabulary_file().empty() || f.hash_buckets() > 0) continue;
      if (f.vocabulary() == 0 || sizes.replace_vocabulary) f.set_vocabulary(sizes.vocabulary);
    }
    for (v1::LayerConfig& l : *config->mutable_layer()) {
      if (l.has_embedding() && absl::StartsWith(l.embedding().ids_from(), "feature:") &&
          (l.embedding().vocabulary() == 0 || sizes.replace_vocabulary)) {
        l.mutable_embedding()->set_vocabulary(sizes.vocabulary);
      }
      if (l.has_embedding_bag() && absl::StartsWith(l.embedding_bag().ids_from(), "feature:") &&
          (l.embedding_bag().vocabulary() == 0 || sizes.replace_vocabulary)) {
        l.mutable_embedding_bag()->set_vocabulary(sizes.vocabulary);
      }
    }
  }
  if (sizes.classes > 0 && config->layer_size() > 0) {
    v1::LayerConfig& last = *config->mutable_layer(config->layer_size() - 1);
    if (last.has_dense() && (!last.dense().has_units() || sizes.replace_classes)) {
      const bool sigmoid = config->loss() == v1::sigmoid_cross_entropy && sizes.classes == 2;
      last.mutable_dense()->set_units(sigmoid ? 1 : sizes.classes);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseShapeFlag(const std::string& flag,
                                                    const std::string& text) {
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 1 || d > (1 << 24)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", text, ": give positive sizes separated by commas (e.g. 32,32,3)"));
    }
    shape.push_back(d);
  }
  return shape;
}

namespace {

// For a config that names an application without an input shape, the
// data's shape unknown: the application's input (--input_shape, else the
// config's, else Keras's) is then the data's. OK when the TFRecord or CSV
// `input`'s values fill it; else InvalidArgument at `at` saying to give
// the shape, rather than only the mismatch later.
absl::Status CheckInputFillsApplication(const v1::ModelConfig& config,
                                        const data::InputSpec& input, const std::string& at,
                                        const DataSizes& sizes) {
  std::vector<int64_t> shape = sizes.input_shape;
  if (shape.empty()) {
    shape.assign(config.application().input_shape().begin(),
                 config.application().input_shape().end());
  }
  if (shape.empty()) shape.assign(std::begin(kApplicationInput), std::end(kApplicationInput));
  int64_t values = 1;
  for (int64_t d : shape) values *= d;
  const int64_t width = data::DenseWidth(input.features);
  if (width == values) return absl::OkStatus();
  return Bad(at, absl::StrCat("application ", config.application().name(), " takes ",
                              ShapeString(shape), " (", values, " values) but the input's "
                              "features hold ", width, " and the config gives no input_shape: "
                              "give the shape of the data's images, input_shape: [height, width, "
                              "channels]",
                              input.format == data::InputFormat::kTfRecord
                                  ? " (a TFRecord image says its own when it is the one feature, "
                                    "decoded as png or raw_uint8, and its training files are "
                                    "found under --data_dir)"
                                  : ""));
}

// The shape of the images the TFRecord `input` reads: its one feature's
// image_shape, or (one bytes feature decoded as png or raw_uint8) the
// first record's of its training files under `data_dir`; empty when it
// reads none or they do not read.
std::vector<int64_t> TfRecordImageShape(const data::InputSpec& input,
                                        const std::string& data_dir) {
  if (input.features.features.size() != 1) return {};
  const data::FeatureDef& image = input.features.features[0];
  if (!image.image_shape.empty()) return image.image_shape;
  if (data_dir.empty() ||
      (image.decode != data::FeatureDecode::kPng && image.decode != data::FeatureDecode::kRawUint8)) {
    return {};
  }
  absl::StatusOr<std::vector<std::string>> files = data::ExpandFiles(input.train_files, data_dir);
  if (!files.ok()) return {};
  return data::FirstImageShape(*files, image.name);
}

}  // namespace

absl::StatusOr<ModelConfigFile> ParseModelConfigFile(const std::string& text,
                                                     const std::string& name,
                                                     const DataSizes& sizes) {
  v1::ModelConfig config;
  TextFormat::Parser parser;
  const std::string unquoted = UnquoteEnumValues(text);
  FirstError errors(unquoted);
  TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(unquoted, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ":", errors.error()));
  }
  const Where where(name, &tree);
  const auto* type = v1::ModelConfig::descriptor();
  // The data's own shape, for an application without an input shape: the
  // IDX header's (read by the caller), or the first TFRecord image's.
  // Without it, a TFRecord or CSV input must fill the application's input.
  // (The input's own errors are left to ParseInput's turn below.)
  std::vector<int64_t> data_shape;
  // An image resized by the input pipeline (image_shape) is resized to the
  // model's input: --input_shape sets both, and an application without its
  // own input shape takes the image's.
  const bool resized_image = config.has_application() && config.input().feature_size() == 1 &&
                             config.input().feature(0).image_shape_size() > 0;
  if (resized_image && !sizes.input_shape.empty()) {
    v1::FeatureConfig* image = config.mutable_input()->mutable_feature(0);
    image->clear_image_shape();
    image->clear_length();
    for (int64_t d : sizes.input_shape) image->add_image_shape(d);
  }
  if (resized_image && config.application().input_shape_size() == 0) {
    for (int64_t d : config.input().feature(0).image_shape()) {
      config.mutable_application()->add_input_shape(d);
    }
  }
  if (config.has_application() && config.input_shape_size() == 0) {
    const v1::InputFormat format = config.input().format();
    data::InputSpec input;
    if (format == v1::FORMAT_UNSET || format == v1::idx) {
      data_shape = sizes.data_shape;
    } else if ((format == v1::tfrecord || format == v1::csv || format == v1::tfds) &&
               ParseInput(config, where, &input).ok()) {
      if (format != v1::csv) data_shape = TfRecordImageShape(input, sizes.data_dir);
      if (data_shape.empty()) {
        PSTRAIN_RETURN_IF_ERROR(CheckInputFillsApplication(
            config, input, where.At(&tree, type, "application"), sizes));
      }
    }
  }
  if (!data_shape.empty()) {
    for (int64_t d : data_shape) config.add_input_shape(d);
    if (config.application().input_shape_size() == 0) {
      for (int64_t d : kApplicationInput) config.mutable_application()->add_input_shape(d);
    }
  }
  if (!sizes.input_shape.empty() && config.has_application()) {
    // A Keras application's own input shape; the data's stays the config's.
    config.mutable_application()->clear_input_shape();
    for (int64_t d : sizes.input_shape) config.mutable_application()->add_input_shape(d);
  } else if (!sizes.input_shape.empty()) {
    config.clear_input_shape();
    config.clear_input_dim();
    for (int64_t d : sizes.input_shape) config.add_input_shape(d);
  }
  if (sizes.alpha >= 0) {
    if (!config.has_application()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": --alpha is MobileNetV2's width multiplier, but the config names no "
                "application"));
    }
    config.mutable_application()->set_alpha(static_cast<float>(sizes.alpha));
  }
  if (sizes.bn_momentum >= 0) {
    if (config.has_application()) {
      config.mutable_application()->set_bn_momentum(static_cast<float>(sizes.bn_momentum));
    }
    for (v1::LayerConfig& l : *config.mutable_layer()) {
      if (l.has_batch_normalization()) {
        l.mutable_batch_normalization()->set_momentum(static_cast<float>(sizes.bn_momentum));
      }
    }
  }
  if (absl::Status s = ExpandApplication(&config); !s.ok()) {
    return Bad(where.At(&tree, type, "application"), s.message());
  }
  ApplyDataSizes(sizes, &config);
  ModelConfigFile out;
  const v1::SecuritySettings& sec = config.security();
  out.security = {sec.tls_cert(), sec.tls_key(), sec.tls_ca(), sec.tls_server_name(),
                  sec.token_file()};
  if (config.variable_size() > 0 && config.layer_size() > 0) {
    return Bad(where.At(&tree, type, "layer", 0),
               "a config lists variables or describes layers, not both");
  }
  if (config.layer_size() == 0) {
    if (config.variable_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": no variable or layer is defined"));
    }
    for (const char* field :
         {"input_dim", "input_shape", "loss", "optimizer", "batch_size", "epochs", "steps",
          "consistency", "replicas_to_aggregate", "seed", "input"}) {
      const auto* f = type->FindFieldByName(field);
      const bool set = f->is_repeated() ? config.GetReflection()->FieldSize(config, f) > 0
                                        : config.GetReflection()->HasField(config, f);
      if (set) {
        return Bad(where.At(&tree, type, field, f->is_repeated() ? 0 : -1),
                   absl::StrCat(field, " is set but there are no layers to train"));
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(out.variables, ParseVariables(config, where));
    return out;
  }
  PSTRAIN_RETURN_IF_ERROR(ParseInput(config, where, &out.job.input));
  const data::InputSpec& input = out.job.input;
  const int64_t dense = data::DenseWidth(input.features);
  const bool from_files = input.format != data::InputFormat::kIdx;
  if (from_files && !config.has_input_dim() && (dense > 0 || config.input_shape_size() == 0)) {
    config.set_input_dim(dense);
  }
  PSTRAIN_ASSIGN_OR_RETURN(out.job.model, ParseLayers(config, where, input));
  if (from_files && out.job.model.input_dim != dense) {
    return Bad(where.At(&tree, type, "input_dim"),
               absl::StrCat("input_dim ", out.job.model.input_dim,
                            " is not the width of the input's float features (", dense, ")"));
  }
  if (from_files && data::IdsWidth(input.features) > 0) {
    std::string names;
    std::set<std::string> read;
    for (const EmbeddingBagSpec& e : out.job.model.embeddings) read.insert(e.feature());
    for (const data::FeatureDef& f : input.features.features) {
      if (!f.is_dense() && read.count(f.name) == 0) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", f.name);
      }
    }
    if (!names.empty()) {
      return Bad(where.At(&tree, type, "input"),
                 absl::StrCat("no layer reads the input's id features (", names,
                              "): an embedding or embedding_bag layer with ids_from: "
                              "\"feature:NAME\" reads one"));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(ParseJob(config, where, &out.job));
  const OptimizerSpec& opt = out.job.optimizer;
  if ((opt.clipnorm > 0 || opt.clipvalue > 0) && !out.job.model.embeddings.empty()) {
    return Bad(where.At(&tree, type, "optimizer"),
               "optimizer clipnorm and clipvalue clip the dense variables' gradients; a model "
               "with embedding tables cannot take them yet (their row gradients are not "
               "clipped)");
  }
  auto graph = ModelGraph::Create(out.job.model);
  if (!graph.ok()) return Bad(name + ": ", graph.status().message());
  out.variables = graph->variables();
  out.trainable = true;
  return out;
}

absl::StatusOr<ModelConfigFile> LoadModelConfigFile(const std::string& path,
                                                    const DataSizes& sizes) {
  auto text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(std::string(text.status().message()));
  return ParseModelConfigFile(*text, path, sizes);
}

absl::StatusOr<std::vector<VariableDef>> ParseModelConfig(const std::string& text,
                                                          const std::string& name) {
  auto file = ParseModelConfigFile(text, name);
  if (!file.ok()) return file.status();
  return std::move(file->variables);
}

absl::StatusOr<std::vector<VariableDef>> LoadModelConfig(const std::string& path) {
  auto file = LoadModelConfigFile(path);
  if (!file.ok()) return file.status();
  return std::move(file->variables);
}

}  // namespace pstrain::model
