#include "exporter/onnx_writer.h"

#include <cstring>
#include <numeric>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"
#include "onnx/onnx_pb.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Built {
  model::NetworkSpec spec;
  std::unique_ptr<model::Network> net;
  std::vector<float> params;  // 0.5, 1.5, 2.5, ...: each value tells its place
};

Built Build(const std::string& config) {
  Built b;
  auto file = model::ParseModelConfigFile(config, "test.pbtxt");
  EXPECT_OK(file.status());
  b.spec = file->job.model;
  auto net = model::Network::Create(b.spec, 1);
  EXPECT_OK(net.status());
  b.net = *std::move(net);
  b.params.resize(b.net->num_parameters());
  for (size_t i = 0; i < b.params.size(); ++i) b.params[i] = 0.5f + static_cast<float>(i);
  return b;
}

onnx::ModelProto Parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

std::vector<std::string> Ops(const onnx::GraphProto& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.node()) ops.push_back(n.op_type());
  return ops;
}

const onnx::TensorProto* Initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

std::vector<float> Floats(const onnx::TensorProto& t) {
  std::vector<float> v(t.raw_data().size() / sizeof(float));
  std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  return v;
}

std::vector<int64_t> Dims(const onnx::ValueInfoProto& v) {
  std::vector<int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    dims.push_back(d.has_dim_param() ? -1 : d.dim_value());
  }
  return dims;
}

TEST(OnnxWriterTest, AnMlpIsMatMulAddReluAndSoftmaxWithItsTrainedValues) {
  const Built b = Build(
      "input_dim: 4\n"
      "layer { dense { units: 3 activation: relu } }\n"
      "layer { dense { units: 2 } }\n");
  ASSERT_OK_AND_ASSIGN(
      const std::string bytes,
      OnnxModelBytes(b.net->graph(), b.params, {}, "9.9.9"));
  const onnx::ModelProto m = Parse(bytes);
  EXPECT_EQ(m.producer_name(), "pstrain");
  EXPECT_EQ(m.producer_version(), "9.9.9");
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), 13);
  const onnx::GraphProto& g = m.graph();
  EXPECT_THAT(Ops(g), ElementsAre("MatMul", "Add", "Relu", "MatMul", "Add", "Softmax"));
  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), "input");
  EXPECT_THAT(Dims(g.input(0)), ElementsAre(-1, 4));
  ASSERT_EQ(g.output_size(), 2);
  EXPECT_EQ(g.output(0).name(), "logits");
  EXPECT_EQ(g.output(1).name(), "probabilities");
  EXPECT_THAT(Dims(g.output(1)), ElementsAre(-1, 2));
  // The last Add gives the logits, which the Softmax reads.
  EXPECT_EQ(g.node(4).output(0), "logits");
  EXPECT_THAT(g.node(5).input(), ElementsAre("logits"));
  EXPECT_THAT(g.node(5).output(), ElementsAre("probabilities"));
  // Keras's [in, out] kernel as it is, then the bias: the flat layout.
  const onnx::TensorProto* k0 = Initializer(g, "dense_0/kernel");
  ASSERT_NE(k0, nullptr);
  EXPECT_THAT(k0->dims(), ElementsAre(4, 3));
  const std::vector<float> kernel = Floats(*k0);
  ASSERT_EQ(kernel.size(), 12u);
  EXPECT_EQ(kernel[0], b.params[b.net->offsets()[0]]);
  EXPECT_EQ(kernel[11], b.params[b.net->offsets()[0] + 11]);
  const onnx::TensorProto* bias1 = Initializer(g, "dense_1/bias");
  ASSERT_NE(bias1, nullptr);
  EXPECT_THAT(Floats(*bias1),
              ElementsAre(b.params[b.net->offsets()[3]], b.params[b.net->offsets()[3] + 1]));
}

TEST(OnnxWriterTest, ASigmoidModelEndsInSigmoid) {
  const Built b = Build(
      "input_dim: 3\n"
      "loss: sigmoid_cross_entropy\n"
      "layer { dense { units: 1 } }\n");
  ASSERT_OK_AND_ASSIGN(
      const std::string bytes,
      OnnxModelBytes(b.net->graph(), b.params, {}, "v"));
  EXPECT_THAT(Ops(Parse(bytes).graph()), ElementsAre("MatMul", "Add", "Sigmoid"));
}

TEST(OnnxWriterTest, ConvolutionsAndPoolsRunInNchwBetweenOneTransposeInAndOneOut) {
  const Built b = Build(
      "input_dim: 32\n"
      "input_shape: [4, 4, 2]\n"
      "layer { conv2d { filters: 3 kernel_size: [2, 2] activation: relu padding: same } }\n"
      "layer { max_pool2d { pool_size: 2 } }\n"
      "layer { flatten {} }\n"
      "layer { dense { units: 2 } }\n");
  ASSERT_OK_AND_ASSIGN(
      const std::string bytes,
      OnnxModelBytes(b.net->graph(), b.params, {}, "v"));
  const onnx::GraphProto g = Parse(bytes).graph();
  // Conv, Relu and MaxPool in NCHW between one Transpose in and one out
  // (not a cancelling pair between the convolution and the pool).
  EXPECT_THAT(Ops(g), ElementsAre("Reshape", "Transpose", "Conv", "Relu", "MaxPool", "Transpose",
                                  "Reshape", "MatMul", "Add", "Softmax"));
  const onnx::NodeProto& conv = g.node(2);
  bool same_upper = false;
  for (const auto& a : conv.attribute()) {
    if (a.name() == "auto_pad") same_upper = a.s() == "SAME_UPPER";
  }
  EXPECT_TRUE(same_upper);
  // Keras's [kh, kw, c_in, c_out] as [c_out, c_in, kh, kw]: element
  // (i=1, j=0, c=1, o=2) of the checkpoint is (o=2, c=1, i=1, j=0) here.
  const onnx::TensorProto* k = Initializer(g, "conv2d_0/kernel");
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(k->dims(), ElementsAre(3, 2, 2, 2));
  const std::vector<float> w = Floats(*k);
  const int64_t kh = 2, kw = 2, cin = 2, cout = 3;
  const int64_t i = 1, j = 0, c = 1, o = 2;
  EXPECT_EQ(w[((o * cin + c) * kh + i) * kw + j],
            b.params[b.net->offsets()[0] + ((i * kw + j) * cin + c) * cout + o]);
}

TEST(OnnxWriterTest, AnEmbeddingBagReadsItsFeatureIdsAndMeansTheKeptRows) {
  const Built b = Build(
      "input_dim: 16\n"
      "layer { embedding_bag { vocabulary: 64 dim: 2 ids_from: \"pixel_buckets:4\" } }\n"
      "layer { dense { units: 2 } }\n");
  std::map<std::string, std::vector<float>> tables;
  const VariableDef& table = b.net->variables().back();
  ASSERT_TRUE(table.embedding);
  tables[table.name] = std::vector<float>(table.elements(), 0.25f);
  ASSERT_OK_AND_ASSIGN(
      const std::string bytes,
      OnnxModelBytes(b.net->graph(), b.params, tables, "v"));
  const onnx::GraphProto g = Parse(bytes).graph();
  const std::vector<std::string> ops = Ops(g);
  EXPECT_THAT(ops, ::testing::Contains("Gather"));
  EXPECT_THAT(ops, ::testing::Contains("Div"));  // the mean over kept ids
  EXPECT_EQ(g.input_size(), 1);                  // pixel buckets read "input" alone
  ASSERT_NE(Initializer(g, table.name), nullptr);
  // Without the table's values the model cannot be written.
  EXPECT_THAT(OnnxModelBytes(b.net->graph(), b.params, {}, "v")
                  .status()
                  .message(),
              HasSubstr("the model has no table " + table.name));
}

TEST(OnnxWriterTest, ValuesThatDoNotFitTheLayersAreRefusedByName) {
  const Built b = Build(
      "input_dim: 4\n"
      "layer { dense { units: 3 } }\n"
      "layer { dense { units: 2 } }\n");
  std::vector<float> short_params(b.params.begin(), b.params.end() - 1);
  absl::StatusOr<std::string> bytes =
      OnnxModelBytes(b.net->graph(), short_params, {}, "v");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.status().message(),
              HasSubstr("the model has no variable dense_1/bias of 2 values"));
}

}  // namespace
}  // namespace pstrain
