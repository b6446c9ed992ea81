#include "exporter/onnx_writer.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/embeddings.h"
#include "model/layers.h"
#include "onnx/onnx_pb.h"  // with ONNX_ML: onnx-ml.pb.h, the one Debian ships

namespace pstrain {
namespace {

using model::Shape;

// A graph under construction: names each value it adds.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto* graph) : graph_(graph) {}

  // A node of `op` over `inputs`; returns its (one) output's name.
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

  std::string Add(const std::string& op, const std::vector<std::string>& inputs) {
    std::string out;
    Node(op, inputs, &out);
    return out;
  }

  // A float initializer `name` of `dims` from `values`.
  std::string Floats(const std::string& name, const Shape& dims, const float* values) {
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
  std::string Ints(const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(absl::StrCat("const_", ++constants_));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }

  // A float scalar initializer.
  std::string Scalar(float value) {
    const std::string name = absl::StrCat("const_", ++constants_);
    return Floats(name, {}, &value);
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

  // [batch, shape...]: the batch dimension kept (0 in Reshape copies it).
  std::string Reshape(const std::string& in, const Shape& shape) {
    std::vector<int64_t> dims = {0};
    dims.insert(dims.end(), shape.begin(), shape.end());
    return Add("Reshape", {in, Ints(dims)});
  }

  std::string CastToFloat(const std::string& in) {
    std::string out;
    onnx::AttributeProto* a = Node("Cast", {in}, &out)->add_attribute();
    a->set_name("to");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(onnx::TensorProto::FLOAT);
    return out;
  }

  std::string Transpose(const std::string& in, const std::vector<int64_t>& perm) {
    std::string out;
    onnx::AttributeProto* a = Node("Transpose", {in}, &out)->add_attribute();
    a->set_name("perm");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t p : perm) a->add_ints(p);
    return out;
  }

 private:
  onnx::GraphProto* graph_;
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

void SetInts(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void SetString(onnx::NodeProto* node, const std::string& name, const std::string& value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

void SetInt(onnx::NodeProto* node, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void SetFloat(onnx::NodeProto* node, const std::string& name, float value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

// A float tensor value [batch, dims...] named `name`.
void DescribeValue(onnx::ValueInfoProto* v, const std::string& name, const Shape& dims) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

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

// A value between layers: channels last, as the model's shapes are, or,
// between convolutions and pools, ONNX's NCHW ([n, c, 1, t] for a 1D one),
// so that a run of them is transposed once in and once out rather than
// around each.
struct Value {
  std::string name;
  bool nchw = false;
};

// `v` of `shape` channels last.
std::string ChannelsLast(GraphBuilder& g, const Value& v, const Shape& shape) {
  if (!v.nchw) return v.name;
  const std::string y = g.Transpose(v.name, {0, 2, 3, 1});
  return shape.size() == 2 ? g.Reshape(y, shape) : y;
}

// Keras's activation `a` on `x`, elementwise (so in either layout). A last
// layer's softmax or sigmoid is not here: it is the graph's last node.
std::string ActivationGraph(GraphBuilder& g, model::Activation a, const std::string& x) {
  switch (a) {
    case model::Activation::kLinear:
    case model::Activation::kSoftmax:
      return x;
    case model::Activation::kRelu:
      return g.Add("Relu", {x});
    case model::Activation::kRelu6:
      return g.Add("Clip", {x, g.Scalar(0.0f), g.Scalar(6.0f)});
    case model::Activation::kSigmoid:
      return g.Add("Sigmoid", {x});
    case model::Activation::kTanh:
      return g.Add("Tanh", {x});
    case model::Activation::kElu:
      return g.Add("Elu", {x});  // alpha 1, ONNX's default as Keras's
    case model::Activation::kSelu:
      return g.Add("Selu", {x});  // ONNX's defaults are SELU's constants
    case model::Activation::kGelu: {
      // x * (1 + erf(x / sqrt(2))) / 2: opset 13 has no Gelu.
      const std::string erf = g.Add("Erf", {g.Add("Mul", {x, g.Scalar(0.7071067811865476f)})});
      const std::string half = g.Add("Mul", {g.Add("Add", {erf, g.Scalar(1.0f)}), g.Scalar(0.5f)});
      return g.Add("Mul", {x, half});
    }
    case model::Activation::kSwish:
      return g.Add("Mul", {x, g.Add("Sigmoid", {x})});
  }
  return x;
}

// A convolution or max pool from `in` of `shape`: computed in NCHW (the
// input transposed there unless it already is), its output left in NCHW.
absl::StatusOr<Value> WindowLayer(GraphBuilder& g, const model::LayerSpec& layer,
                                  const Shape& shape, const VariableValues& values,
                                  const Value& in) {
  const bool one_d = shape.size() == 2;
  const Shape in3 = one_d ? Shape{1, shape[0], shape[1]} : shape;
  std::string y =
      in.nchw ? in.name : g.Transpose(one_d ? g.Reshape(in.name, in3) : in.name, {0, 3, 1, 2});
  const bool depthwise = layer.kind == model::LayerKind::kDepthwiseConv2D;
  const bool conv = layer.kind == model::LayerKind::kConv1D ||
                    layer.kind == model::LayerKind::kConv2D || depthwise;
  onnx::NodeProto* node;
  if (conv) {
    // Keras's [kh, kw, c_in, c_out] as ONNX's [c_out, c_in, kh, kw]; a
    // depthwise [kh, kw, C, m] as a Conv of C groups, [C * m, 1, kh, kw]
    // (output channel c * m + j is group c's j-th).
    const int64_t kh = layer.window[0], kw = layer.window[1];
    const int64_t cin = depthwise ? 1 : in3[2];
    const int64_t cout = depthwise ? in3[2] * layer.depth_multiplier : layer.units;
    const std::string kernel_name = absl::StrCat(layer.name, "/", layer.kernel_name());
    PSTRAIN_ASSIGN_OR_RETURN(const float* kernel, values.Of(kernel_name, kh * kw * cin * cout));
    std::vector<float> w(kh * kw * cin * cout);
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j)
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t o = 0; o < cout; ++o)
            w[((o * cin + c) * kh + i) * kw + j] = kernel[((i * kw + j) * cin + c) * cout + o];
    std::vector<std::string> inputs = {y, g.Floats(kernel_name, {cout, cin, kh, kw}, w.data())};
    if (layer.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(const float* bias, values.Of(layer.name + "/bias", cout));
      inputs.push_back(g.Floats(layer.name + "/bias", {cout}, bias));
    }
    node = g.Node("Conv", inputs, &y);
    SetInts(node, "kernel_shape", {kh, kw});
    if (depthwise) SetInt(node, "group", in3[2]);
  } else if (layer.kind == model::LayerKind::kAveragePool2D) {
    node = g.Node("AveragePool", {y}, &y);
    SetInts(node, "kernel_shape", {layer.window[0], layer.window[1]});
    SetInt(node, "count_include_pad", 0);  // Keras's mean of the cells inside
  } else {
    node = g.Node("MaxPool", {y}, &y);
    SetInts(node, "kernel_shape", {layer.window[0], layer.window[1]});
  }
  SetInts(node, "strides", {layer.stride[0], layer.stride[1]});
  // Keras's "same" puts the odd padding after: SAME_UPPER.
  SetString(node, "auto_pad", layer.same_padding ? "SAME_UPPER" : "VALID");
  if (conv && layer.relu) y = g.Add("Relu", {y});
  if (conv) y = ActivationGraph(g, layer.activation, y);
  return Value{y, true};
}

// A batch normalization in inference (its moving statistics) on `x` of
// `shape`: ONNX's BatchNormalization takes the channels at axis 1, where
// NCHW and a flat [N, C] have them; [N, H, W, C] goes to NCHW first and
// [N, T, C] there and back.
absl::StatusOr<Value> BatchNormGraph(GraphBuilder& g, const model::LayerSpec& layer,
                                     const Shape& shape, const VariableValues& values,
                                     const Value& x) {
  const int64_t c = shape.back();
  auto variable = [&](const char* suffix, bool present, float fill) -> absl::StatusOr<std::string> {
    const std::string name = absl::StrCat(layer.name, "/", suffix);
    if (!present) {
      const std::vector<float> constant(c, fill);
      return g.Floats(name, {c}, constant.data());
    }
    PSTRAIN_ASSIGN_OR_RETURN(const float* v, values.Of(name, c));
    return g.Floats(name, {c}, v);
  };
  PSTRAIN_ASSIGN_OR_RETURN(const std::string gamma, variable("gamma", layer.scale, 1.0f));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string beta, variable("beta", layer.center, 0.0f));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string mean, variable("moving_mean", true, 0.0f));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string var, variable("moving_variance", true, 0.0f));
  auto normalise = [&](const std::string& in) {
    std::string y;
    onnx::NodeProto* node = g.Node("BatchNormalization", {in, gamma, beta, mean, var}, &y);
    SetFloat(node, "epsilon", layer.epsilon);
    return y;
  };
  if (x.nchw || shape.size() == 1) return Value{normalise(x.name), x.nchw};
  if (shape.size() == 3) return Value{normalise(g.Transpose(x.name, {0, 3, 1, 2})), true};
  return Value{g.Transpose(normalise(g.Transpose(x.name, {0, 2, 1})), {0, 2, 1})};
}

// `layer` applied to `x` of `shape`: its output.
absl::StatusOr<Value> LayerGraph(GraphBuilder& g, const model::LayerSpec& layer,
                                 const Shape& shape, const VariableValues& values,
                                 const Value& x) {
  switch (layer.kind) {
    case model::LayerKind::kConv1D:
    case model::LayerKind::kConv2D:
    case model::LayerKind::kMaxPool1D:
    case model::LayerKind::kMaxPool2D:
    case model::LayerKind::kAveragePool2D:
    case model::LayerKind::kDepthwiseConv2D:
      return WindowLayer(g, layer, shape, values, x);
    case model::LayerKind::kDropout:
      return x;  // inference: the identity, in whichever layout
    case model::LayerKind::kBatchNormalization:
      return BatchNormGraph(g, layer, shape, values, x);
    case model::LayerKind::kRescaling:  // elementwise, in whichever layout
      return Value{g.Add("Add", {g.Add("Mul", {x.name, g.Scalar(layer.rescale)}),
                                 g.Scalar(layer.offset)}),
                   x.nchw};
    case model::LayerKind::kActivation:
    case model::LayerKind::kReLU:
      return Value{ActivationGraph(g, layer.activation, x.name), x.nchw};
    case model::LayerKind::kGlobalAveragePool2D:
    case model::LayerKind::kGlobalMaxPool2D: {
      // Over the positions of NCHW or of [N, H, W, C]: [N, C] either way.
      std::string y;
      onnx::NodeProto* node = g.Node(
          layer.kind == model::LayerKind::kGlobalMaxPool2D ? "ReduceMax" : "ReduceMean", {x.name},
          &y);
      SetInts(node, "axes", x.nchw ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{1, 2});
      SetInt(node, "keepdims", 0);
      return Value{y};
    }
    case model::LayerKind::kZeroPadding2D: {
      const int64_t top = layer.padding[0], bottom = layer.padding[1], left = layer.padding[2],
                    right = layer.padding[3];
      const std::vector<int64_t> pads =
          x.nchw ? std::vector<int64_t>{0, 0, top, left, 0, 0, bottom, right}
                 : std::vector<int64_t>{0, top, left, 0, 0, bottom, right, 0};
      return Value{g.Add("Pad", {x.name, g.Ints(pads)}), x.nchw};
    }
    default:
      break;
  }
  const std::string in = ChannelsLast(g, x, shape);
  switch (layer.kind) {
    case model::LayerKind::kDense: {
      const Shape k = model::LayerVariableShapes(layer, shape)[0];
      PSTRAIN_ASSIGN_OR_RETURN(const float* kernel, values.Of(layer.name + "/kernel", k[0] * k[1]));
      std::string y = g.Add("MatMul", {in, g.Floats(layer.name + "/kernel", k, kernel)});
      if (layer.use_bias) {
        PSTRAIN_ASSIGN_OR_RETURN(const float* bias, values.Of(layer.name + "/bias", k[1]));
        y = g.Add("Add", {y, g.Floats(layer.name + "/bias", {k[1]}, bias)});
      }
      return Value{ActivationGraph(g, layer.relu ? model::Activation::kRelu : layer.activation, y)};
    }
    case model::LayerKind::kGlobalAveragePool1D: {
      std::string y;
      onnx::NodeProto* node = g.Node("ReduceMean", {in}, &y);
      SetInts(node, "axes", {1});
      SetInt(node, "keepdims", 0);
      return Value{y};
    }
    case model::LayerKind::kFlatten:
      return Value{g.Reshape(in, {-1})};
    default:
      break;
  }
  return absl::InternalError(absl::StrCat("layer ", layer.name, " has an unknown kind"));
}

// An add or concatenate of the values at `reads`: in NCHW when all of them
// are (concatenated along its channel axis, 1), else channels last.
absl::StatusOr<Value> MergeGraph(GraphBuilder& g, const model::LayerSpec& layer,
                                 const std::vector<int>& reads, const std::vector<Value>& at,
                                 const std::vector<Shape>& shapes) {
  bool nchw = true;
  for (int r : reads) nchw = nchw && at[r].nchw;
  std::vector<std::string> ins;
  for (int r : reads) ins.push_back(nchw ? at[r].name : ChannelsLast(g, at[r], shapes[r]));
  std::string y;
  if (layer.kind == model::LayerKind::kAdd) {
    // ONNX's Add takes two: a chain for more.
    y = ins[0];
    for (size_t i = 1; i < ins.size(); ++i) y = g.Add("Add", {y, ins[i]});
    return Value{y, nchw};
  }
  onnx::NodeProto* node = g.Node("Concat", ins, &y);
  SetInt(node, "axis", nchw ? 1 : -1);
  return Value{y, nchw};
}

}  // namespace

absl::StatusOr<std::string> OnnxModelBytes(const model::Network& net,
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
  GraphBuilder g(graph);
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
  std::vector<Value> at = {Value{x}};
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const model::LayerSpec& layer = spec.layers[l];
    const std::vector<int>& reads = net.layer_inputs(static_cast<int>(l));
    // The last layer gives the logits: its softmax (or sigmoid) comes after.
    model::LayerSpec logits = layer;
    if (l + 1 == spec.layers.size()) logits.activation = model::Activation::kLinear;
    Value v;
    if (layer.merges()) {
      PSTRAIN_ASSIGN_OR_RETURN(v, MergeGraph(g, layer, reads, at, shapes));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(v, LayerGraph(g, logits, shapes[reads[0]], values, at[reads[0]]));
    }
    at.push_back(v);
  }
  Value v = at.back();
  shape = shapes.back();
  // The last layer is dense: its output is channels last already.
  x = ChannelsLast(g, v, shape);
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
