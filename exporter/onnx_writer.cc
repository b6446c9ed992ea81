#include "exporter/onnx_writer.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/embeddings.h"
#include "model/layer_kind.h"
#include "model/layers.h"
#include "onnx/onnx_pb.h"  // with ONNX_ML: onnx-ml.pb.h, the one Debian ships

namespace pstrain {
namespace {

using model::Shape;

void SetInt(onnx::NodeProto* node, const std::string& name, int64_t value);

// The model's variables by name, each as `elements` floats of `params`.
class VariableValues {
 public:
  VariableValues(const std::vector<VariableDef>& variables, const std::vector<int64_t>& offsets,
                 const std::vector<float>& params)
      : variables_(variables), offsets_(offsets), params_(params) {
    for (size_t v = 0; v < variables.size(); ++v) index_[variables[v].name] = v;
  }

  // Variable `name` of `elements` floats, or an error naming it.
  absl::StatusOr<const float*> Of(const std::string& name, int64_t elements) const {
    auto it = index_.find(name);
    if (it == index_.end() || variables_[it->second].elements() != elements ||
        offsets_[it->second] + elements > static_cast<int64_t>(params_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has no variable ", name, " of ", elements, " values"));
    }
    return params_.data() + offsets_[it->second];
  }

 private:
  const std::vector<VariableDef>& variables_;
  const std::vector<int64_t>& offsets_;
  const std::vector<float>& params_;
  std::map<std::string, size_t> index_;
};

// A graph under construction: names each value it adds. The layers write
// theirs through model::OnnxGraph (model/layer_kind.h).
class GraphBuilder final : public model::OnnxGraph {
 public:
  GraphBuilder(onnx::GraphProto* graph, const VariableValues& values)
      : graph_(graph), values_(values) {}

  // A node of `op` over `inputs`; returns it, its (one) output's name in
  // *output.
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        std::string* output) {
    onnx::NodeProto* node = graph_->add_node();
    node->set_op_type(op);
    node->set_name(absl::StrCat(op, "_", graph_->node_size()));
    for (const std::string& in : inputs) node->add_input(in);
    *output = absl::StrCat(op, "_", graph_->node_size(), "_out");
    node->add_output(*output);
    return node;
  }

  std::string Node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<model::OnnxAttr>& attrs) override {
    std::string out;
    onnx::NodeProto* node = Node(op, inputs, &out);
    for (const model::OnnxAttr& attr : attrs) {
      onnx::AttributeProto* a = node->add_attribute();
      a->set_name(attr.name);
      switch (attr.type) {
        case model::OnnxAttr::Type::kInt:
          a->set_type(onnx::AttributeProto::INT);
          a->set_i(attr.i);
          break;
        case model::OnnxAttr::Type::kInts:
          a->set_type(onnx::AttributeProto::INTS);
          for (int64_t v : attr.ints) a->add_ints(v);
          break;
        case model::OnnxAttr::Type::kFloat:
          a->set_type(onnx::AttributeProto::FLOAT);
          a->set_f(attr.f);
          break;
        case model::OnnxAttr::Type::kString:
          a->set_type(onnx::AttributeProto::STRING);
          a->set_s(attr.s);
          break;
      }
    }
    return out;
  }
  std::string Add(const std::string& op, const std::vector<std::string>& inputs) {
    return Node(op, inputs, std::vector<model::OnnxAttr>{});
  }

  // A float initializer `name` of `dims` from `values`.
  std::string Floats(const std::string& name, const Shape& dims, const float* values) override {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    t->set_raw_data(reinterpret_cast<const char*>(values), n * sizeof(float));
    return name;
  }

  // An int64 initializer (shapes, axes).
  std::string Ints(const std::vector<int64_t>& values) override {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(absl::StrCat("const_", ++constants_));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }

  // A float scalar initializer.
  std::string Scalar(float value) override {
    const std::string name = absl::StrCat("const_", ++constants_);
    return Floats(name, {}, &value);
  }

  absl::StatusOr<const float*> Variable(const std::string& name,
                                        int64_t elements) const override {
    return values_.Of(name, elements);
  }

  // An int64 initializer of `dims` (e.g. [1, F]: a row to broadcast).
  std::string IntTensor(const Shape& dims, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(absl::StrCat("const_", ++constants_));
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }

  std::string CastToFloat(const std::string& in) {
    std::string out;
    SetInt(Node("Cast", {in}, &out), "to", onnx::TensorProto::FLOAT);
    return out;
  }

 private:
  onnx::GraphProto* graph_;
  const VariableValues& values_;
  int constants_ = 0;
};

// Example b's rows of `table` for `ids` ([batch, L] int64), kept where
// `keep` ([batch, L] bool) holds, zeros elsewhere: [batch, L, dim]. `ids`
// must name a row everywhere (0 where not kept).
std::string KeptRows(GraphBuilder& g, const std::string& table, const std::string& ids,
                     const std::string& keep, std::string* kept_floats) {
  const std::string rows = g.Add("Gather", {table, ids});
  *kept_floats = g.CastToFloat(keep);
  return g.Add("Mul", {rows, g.Add("Unsqueeze", {*kept_floats, g.Ints({2})})});
}

void SetInt(onnx::NodeProto* node, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

// A float tensor value [batch, dims...] named `name`.
void DescribeValue(onnx::ValueInfoProto* v, const std::string& name, const Shape& dims) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// Embedding `e`'s ids ([batch, L] int64, 0 where none) into *ids and
// which of them take a row ([batch, L] bool) into *keep.
void EmbeddingIds(GraphBuilder& g, const model::EmbeddingBagSpec& e, int64_t input_dim,
                  std::string* ids, std::string* keep) {
  if (e.from_feature()) {
    // Its ids: columns [offset, offset + length) of "ids".
    *ids = g.Add("Slice", {"ids", g.Ints({e.ids_offset}), g.Ints({e.ids_offset + e.ids_length}),
                           g.Ints({1})});
    // Id 0 is padding in a bag, and in a sequence with mask_zero.
    *keep = (!e.sequence || e.mask_zero)
                ? g.Add("Not", {g.Add("Equal", {*ids, g.IntTensor({}, {0})})})
                : g.Add("Equal", {*ids, *ids});
    return;
  }
  // pixel_buckets:B: feature f > 0 is id f * B + its bucket,
  // min(x * B, B - 1) truncated; other features take no row.
  const int64_t buckets = std::stoll(e.ids_from.substr(14));
  const float steps = static_cast<float>(buckets);
  *keep = g.Add("Greater", {"input", g.Scalar(0.0f)});
  std::string bucket = g.Add(
      "Floor", {g.Add("Min", {g.Add("Mul", {"input", g.Scalar(steps)}), g.Scalar(steps - 1.0f)})});
  std::string as_int;
  onnx::NodeProto* cast = g.Node("Cast", {bucket}, &as_int);
  SetInt(cast, "to", onnx::TensorProto::INT64);
  std::vector<int64_t> base(input_dim);
  for (int64_t f = 0; f < input_dim; ++f) base[f] = f * buckets;
  const std::string all = g.Add("Add", {g.IntTensor({1, input_dim}, base), as_int});
  *ids = g.Add("Where", {*keep, all, g.IntTensor({}, {0})});
}

// The embeddings side by side (model/embeddings.h): their output's name,
// its shape into *shape. Adds the "ids" input when one reads id features.
absl::StatusOr<std::string> EmbeddingsGraph(GraphBuilder& g, onnx::GraphProto* graph,
                                            const model::NetworkSpec& spec,
                                            const std::map<std::string, std::vector<float>>& tables,
                                            Shape* shape) {
  PSTRAIN_ASSIGN_OR_RETURN(model::Embeddings embeddings,
                           model::Embeddings::Create(spec.embeddings, spec.input_dim));
  if (embeddings.reads_ids()) {
    // The id features in the input's id layout (data/feature_spec.h).
    onnx::ValueInfoProto* ids = graph->add_input();
    ids->set_name("ids");
    onnx::TypeProto::Tensor* t = ids->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::INT64);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_param("ids_width");
  }
  std::vector<std::string> outputs;
  for (int i = 0; i < embeddings.size(); ++i) {
    const model::EmbeddingBagSpec& e = embeddings[i].spec();
    auto it = tables.find(e.table());
    if (it == tables.end() || static_cast<int64_t>(it->second.size()) != e.vocabulary * e.dim) {
      return absl::InvalidArgumentError(absl::StrCat("the model has no table ", e.table(), " of ",
                                                     e.vocabulary, " x ", e.dim, " values"));
    }
    const std::string table = g.Floats(e.table(), {e.vocabulary, e.dim}, it->second.data());
    std::string ids, keep;
    EmbeddingIds(g, e, spec.input_dim, &ids, &keep);
    std::string kept;
    std::string rows = KeptRows(g, table, ids, keep, &kept);
    if (e.sequence) {
      outputs.push_back(rows);  // [batch, T, dim]
      continue;
    }
    std::string bag = g.Add("ReduceSum", {rows, g.Ints({1})});
    SetInt(graph->mutable_node(graph->node_size() - 1), "keepdims", 0);
    if (e.combiner == model::EmbeddingBagSpec::Combiner::kMean) {
      // Over the ids kept; an empty bag stays zeros.
      std::string count = g.Add("ReduceSum", {kept, g.Ints({1})});
      count = g.Add("Max", {count, g.Scalar(1.0f)});
      bag = g.Add("Div", {bag, count});
    }
    outputs.push_back(bag);
  }
  *shape = embeddings.output_shape();
  if (outputs.size() == 1) return outputs[0];
  std::string x;
  onnx::NodeProto* concat = g.Node("Concat", outputs, &x);
  SetInt(concat, "axis", 1);
  return x;
}

}  // namespace

absl::StatusOr<std::string> OnnxModelBytes(const model::ModelGraph& net,
                                           const std::vector<float>& params,
                                           const std::map<std::string, std::vector<float>>& tables,
                                           const std::string& producer_version) {
  const model::NetworkSpec& spec = net.spec();
  const VariableValues values(net.variables(), net.offsets(), params);
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.set_producer_name("pstrain");
  model.set_producer_version(producer_version);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("pstrain_model");
  GraphBuilder g(graph, values);
  // The float features (a model that reads ids alone may have none).
  if (spec.input_dim > 0) DescribeValue(graph->add_input(), "input", {spec.input_dim});
  Shape shape = spec.input_shape.empty() ? Shape{spec.input_dim} : spec.input_shape;
  std::string x = "input";
  if (!spec.embeddings.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(x, EmbeddingsGraph(g, graph, spec, tables, &shape));
  } else if (shape.size() > 1) {
    x = g.Reshape(x, shape);
  }
  // Each position's value (net.shapes()'s positions: the input, then each
  // layer's output); a graph's layers read the ones net.layer_inputs says.
  const std::vector<Shape>& shapes = net.shapes();
  std::vector<model::OnnxValue> at = {model::OnnxValue{x}};
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const model::LayerSpec& layer = spec.layers[l];
    // The last layer gives the logits: its softmax (or sigmoid) comes after.
    model::LayerSpec logits = layer;
    if (l + 1 == spec.layers.size()) logits.activation = model::Activation::kLinear;
    std::vector<Shape> ins;
    std::vector<model::OnnxValue> xs;
    for (int r : net.layer_inputs(static_cast<int>(l))) {
      ins.push_back(shapes[r]);
      xs.push_back(at[r]);
    }
    PSTRAIN_ASSIGN_OR_RETURN(model::OnnxValue v,
                             model::KindDef(layer.kind).ExportOnnx(g, logits, ins, xs));
    at.push_back(std::move(v));
  }
  shape = shapes.back();
  // The last layer is dense: its output is channels last already.
  x = g.ChannelsLast(at.back(), shape);
  // The logits, and the probabilities predict reports.
  graph->mutable_node(graph->node_size() - 1)->set_output(0, "logits");
  const std::string probabilities = spec.binary() ? "Sigmoid" : "Softmax";
  std::string p;
  onnx::NodeProto* last = g.Node(probabilities, {"logits"}, &p);
  last->set_output(0, "probabilities");
  if (!spec.binary()) SetInt(last, "axis", -1);
  DescribeValue(graph->add_output(), "logits", shape);
  DescribeValue(graph->add_output(), "probabilities", shape);
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return absl::InternalError("the ONNX model does not serialize (over 2 GiB?)");
  }
  return bytes;
}

}  // namespace pstrain
