#include "model/model_config.h"

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/input.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/network.h"

namespace pstrain::model {
namespace {

TEST(ModelConfigTest, LoadsVariablesWithKindsAndOverrides) {
  const std::string path = pstrain::testing::TempDir() + "/model.pbtxt";
  ASSERT_OK(WriteFileAtomically(path, R"pb(
    # dense layers train sync, the table async
    variable {
      name: "dense_0/kernel"
      shape: [ 784, 256 ]
      consistency: "sync"
    }
    variable { name: "dense_0/bias" shape: 256 }
    variable {
      name: "emb"
      shape: [ 100000, 16 ]
      embedding: true
      consistency: "async"
      initializer: "uniform:0.05"
    }
  )pb"));
  ASSERT_OK_AND_ASSIGN(auto vars, LoadModelConfig(path));
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[0].name, "dense_0/kernel");
  EXPECT_EQ(vars[0].shape, (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(vars[0].consistency, Consistency::Sync());
  EXPECT_FALSE(vars[0].embedding);
  EXPECT_EQ(vars[1].shape, (std::vector<int64_t>{256}));
  EXPECT_TRUE(vars[2].embedding);
  EXPECT_EQ(vars[2].initializer, "uniform:0.05");
}

TEST(ModelConfigTest, BadConfigsNameTheLineOrTheVariable) {
  auto r = ParseModelConfig("variable { name: \"a\" shape: [2] }\nvariable { nmae: \"b\" }\n",
                            "m.pbtxt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()),
            "m.pbtxt:2:16: Message type \"pstrain.v1.VariableConfig\" has no field named "
            "\"nmae\".");
  r = ParseModelConfig("variable { name: \"a\" shape: [2, 0] }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt:1:1: variable 0 (a): shape has a dimension of 0");
  r = ParseModelConfig("variable { shape: [2] }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt:1:1: variable 0 (no name): name is missing");
  r = ParseModelConfig("variable { name: \"a\" shape: 1 }\n  variable { name: \"a\" }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt:2:3: variable 1 (a): the name is used twice");
  r = ParseModelConfig("variable { name: \"a\" }", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt:1:1: variable 0 (a): shape is missing");
  r = ParseModelConfig("variable { name: \"e\" shape: [5] embedding: true }", "m.pbtxt");
  EXPECT_EQ(r.status().message(),
            "m.pbtxt:1:1: variable 0 (e): an embedding table's shape is [vocabulary, dim]");
  r = ParseModelConfig("variable { name: \"a\" shape: [2] consistency: \"ssp\" }", "m.pbtxt");
  EXPECT_EQ(r.status().message(),
            "m.pbtxt:1:1: variable 0 (a): consistency \"ssp\" is not one of async, sync, ssp:S (S "
            "an integer from 0 to 1000000)");
  r = ParseModelConfig("", "m.pbtxt");
  EXPECT_EQ(r.status().message(), "m.pbtxt: no variable or layer is defined");
  auto missing = LoadModelConfig("/nonexistent/m.pbtxt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelConfigTest, TheFashionMnistMlpConfigDescribesTheGuideModel) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, LoadModelConfigFile("configs/fashion_mnist_mlp.pbtxt"));
  ASSERT_TRUE(f.trainable);
  const JobSpec& job = f.job;
  EXPECT_EQ(job.model.input_dim, 784);
  ASSERT_EQ(job.model.layers.size(), 3u);
  EXPECT_EQ(job.model.layers[0].units, 256);
  EXPECT_TRUE(job.model.layers[0].relu);
  EXPECT_EQ(job.model.layers[1].units, 256);
  EXPECT_TRUE(job.model.layers[1].relu);
  EXPECT_EQ(job.model.layers[2].units, 10);
  EXPECT_FALSE(job.model.layers[2].relu);
  EXPECT_EQ(job.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(job.optimizer.learning_rate, 0.001f);
  EXPECT_EQ(job.batch_size, 32);
  EXPECT_EQ(job.epochs, 2);
  ASSERT_EQ(f.variables.size(), 6u);
  EXPECT_EQ(f.variables[0].name, "dense_0/kernel");
  EXPECT_EQ(f.variables[0].shape, (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(f.variables[5].name, "dense_2/bias");
  EXPECT_EQ(f.variables[5].shape, (std::vector<int64_t>{10}));
}

TEST(ModelConfigTest, TheFashionMnistCnnConfigDescribesTheTutorialModel) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, LoadModelConfigFile("configs/fashion_mnist_cnn.pbtxt"));
  ASSERT_TRUE(f.trainable);
  const NetworkSpec& m = f.job.model;
  EXPECT_EQ(m.input_shape, (Shape{28, 28, 1}));
  ASSERT_EQ(m.layers.size(), 5u);
  EXPECT_EQ(m.layers[0].kind, LayerKind::kConv2D);
  EXPECT_EQ(m.layers[0].name, "conv2d_0");
  EXPECT_EQ(m.layers[0].units, 32);
  EXPECT_EQ(m.layers[0].window, (std::array<int, 2>{3, 3}));
  EXPECT_TRUE(m.layers[0].relu);
  EXPECT_EQ(m.layers[1].kind, LayerKind::kMaxPool2D);
  EXPECT_EQ(m.layers[1].stride, (std::array<int, 2>{2, 2}));  // strides default to the pool
  EXPECT_EQ(m.layers[2].kind, LayerKind::kFlatten);
  EXPECT_EQ(m.layers[3].name, "dense_0");
  ASSERT_EQ(f.variables.size(), 6u);
  EXPECT_EQ(f.variables[0].name, "conv2d_0/kernel");
  EXPECT_EQ(f.variables[0].shape, (std::vector<int64_t>{3, 3, 1, 32}));
  EXPECT_EQ(f.variables[2].shape, (std::vector<int64_t>{5408, 128}));
}

TEST(ModelConfigTest, LayerOptionsAndShapesThatDoNotFitAreNamedAtTheirField) {
  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile(text, "m.pbtxt").status().message());
  };
  const std::string seq = "input_dim: 12\ninput_shape: [4, 3]\n";
  // A kernel longer than the sequence, at kernel_size.
  EXPECT_EQ(message(seq + "layer { conv1d { filters: 2\n  kernel_size: 5 } }\n"
                          "layer { flatten {} }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:4:3: layer 0 (conv1d_0): conv1d kernel 5 is longer than a length of 4 "
            "(valid padding): nothing is left to convolve");
  // A pool that leaves zero length, at pool_size.
  EXPECT_EQ(message(seq + "layer { conv1d { filters: 2 kernel_size: 3 } }\n"
                          "layer { max_pool1d { pool_size: 3 } }\n"
                          "layer { flatten {} }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:4:22: layer 1 (max_pool1d_0): max_pool1d pool 3 leaves zero length from a "
            "length of 2 (valid padding)");
  // Flatten before anything: the input is already flat.
  EXPECT_EQ(message("input_dim: 12\nlayer { flatten {} }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:2:1: layer 0 (flatten_0): flatten has nothing to flatten: its input [12] is "
            "already flat (give the model an input_shape, or put flatten after a convolution or "
            "pooling)");
  // A dense layer on a sequence; the last layer not dense.
  EXPECT_EQ(message(seq + "layer { dense { units: 2 } }"),
            "m.pbtxt:3:1: layer 0 (dense_0): dense needs a flat [N] input but its input is [4, 3]: "
            "put flatten or global_average_pool1d before it");
  EXPECT_EQ(message(seq + "layer { global_average_pool1d {} }"),
            "m.pbtxt:3:1: layer 0 (global_average_pool1d_0): the last layer gives the logits of "
            "softmax cross-entropy: it must be dense, not global_average_pool1d");
  // Field values.
  EXPECT_EQ(message(seq + "layer { conv1d { filters: 2 kernel_size: [2, 2] } }"),
            "m.pbtxt:3:29: layer 0 (conv1d_0): conv1d.kernel_size has 2 values: one expected");
  EXPECT_EQ(message(seq + "layer { conv1d { filters: 2 kernel_size: 2 padding: \"full\" } }"),
            "m.pbtxt:3:54: Unknown enumeration value of \"full\" for field \"padding\". It is "
            "one of: valid, same.");
  EXPECT_EQ(message(seq + "layer { conv1d { kernel_size: 2 } }"),
            "m.pbtxt:3:1: layer 0 (conv1d_0): conv1d.filters is missing");
  EXPECT_EQ(message(seq + "layer { dropout { rate: 1.5 } }"),
            "m.pbtxt:3:19: layer 0 (dropout_0): dropout rate 1.5 is not in [0, 1)");
  EXPECT_EQ(message("input_dim: 12\ninput_shape: [4, 4]\nlayer { dense { units: 2 } }"),
            "m.pbtxt:2:1: input_shape [4, 4] holds 16 values but input_dim is 12");
  EXPECT_EQ(message("input_dim: 12\nlayer { dense { units: 2 } flatten {} }"),
            "m.pbtxt:2:1: layer 0 (layer_0): gives both dense and flatten: one type per layer");
  // input_shape alone gives input_dim.
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f,
                       ParseModelConfigFile("input_shape: [2, 3]\nlayer { conv1d { filters: 4 "
                                            "kernel_size: 2 padding: \"same\" strides: 2 } }\n"
                                            "layer { max_pool1d { pool_size: 1 } }\n"
                                            "layer { global_average_pool1d {} }\n"
                                            "layer { dense { units: 2 } }",
                                            "m.pbtxt"));
  EXPECT_EQ(f.job.model.input_dim, 6);
  EXPECT_TRUE(f.job.model.layers[0].same_padding);
  EXPECT_EQ(f.job.model.layers[0].stride, (std::array<int, 2>{1, 2}));
}

// Layers that name their inputs make a graph, as Keras's functional API.
TEST(ModelConfigTest, LayersThatNameTheirInputsMakeAGraph) {
  const std::string head =
      "input_shape: [6, 6, 2]\n"
      "layer { name: \"c1\" conv2d { filters: 2 kernel_size: 3 padding: same } }\n";
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile(head + "layer { add {} inputs: [\"c1\", \"input\"] }\n"
                                  "layer { name: \"p\" conv2d { filters: 3 kernel_size: 1 } "
                                  "inputs: \"input\" }\n"
                                  "layer { concatenate { axis: 3 } inputs: [\"add_0\", \"p\"] }\n"
                                  "layer { flatten {} }\nlayer { dense { units: 4 } }",
                           "m.pbtxt"));
  const NetworkSpec& m = f.job.model;
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_EQ(m.layers[1].kind, LayerKind::kAdd);
  EXPECT_EQ(m.layers[1].name, "add_0");
  EXPECT_EQ(m.layers[1].inputs, (std::vector<std::string>{"c1", "input"}));
  EXPECT_EQ(m.layers[3].kind, LayerKind::kConcatenate);
  EXPECT_TRUE(m.layers[4].inputs.empty());
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(m, 1));
  EXPECT_FALSE(net->sequential());
  EXPECT_EQ(net->shapes()[4], (Shape{6, 6, 5}));
  EXPECT_EQ(f.variables.size(), 6u);  // c1, p and dense_0: kernel and bias

  auto message = [&](const std::string& rest) {
    return std::string(ParseModelConfigFile(head + rest, "m.pbtxt").status().message());
  };
  EXPECT_EQ(message("layer { add {} inputs: [\"c1\", \"c2\"] }\nlayer { flatten {} }\n"
                    "layer { dense { units: 4 } }"),
            "m.pbtxt:3:1: layer 1 (add_0): inputs: \"c2\" is not a layer before this one (nor "
            "\"input\", the model's input)");
  EXPECT_EQ(message("layer { add {} inputs: \"c1\" }\nlayer { flatten {} }\n"
                    "layer { dense { units: 4 } }"),
            "m.pbtxt:3:1: layer 1 (add_0): add needs at least two inputs (name them in inputs), "
            "not 1");
  EXPECT_EQ(message("layer { name: \"p\" conv2d { filters: 3 kernel_size: 1 } inputs: \"input\" }\n"
                    "layer { concatenate { axis: 1 } inputs: [\"c1\", \"p\"] }\n"
                    "layer { flatten {} }\nlayer { dense { units: 4 } }"),
            "m.pbtxt:4:23: layer 2 (concatenate_0): concatenate.axis 1 is not the last axis (-1, "
            "or 3 for an input of [6, 6, 2]): concatenate joins along the channel axis only");
  EXPECT_EQ(message("layer { name: \"p\" conv2d { filters: 3 kernel_size: 3 } inputs: \"input\" }\n"
                    "layer { add {} inputs: [\"c1\", \"p\"] }\n"
                    "layer { flatten {} }\nlayer { dense { units: 4 } }"),
            "m.pbtxt:4:1: layer 2 (add_0): add needs inputs of one shape, but input 1 is [4, 4, 3] "
            "and input 0 [6, 6, 2]");
  // A branch nothing reads.
  EXPECT_EQ(message("layer { name: \"p\" conv2d { filters: 3 kernel_size: 1 } inputs: \"input\" }\n"
                    "layer { flatten {} inputs: \"c1\" }\nlayer { dense { units: 4 } }"),
            "m.pbtxt:3:1: layer 1 (p): no later layer reads its output (name it in a later "
            "layer's inputs; only the last layer's output is the model's)");
  EXPECT_EQ(message("layer { name: \"input\" flatten {} inputs: \"c1\" }\n"
                    "layer { dense { units: 4 } }"),
            "m.pbtxt:3:1: layer 1 (input): \"input\" names the model's input in a model whose "
            "layers name their inputs: give this layer another name");
}

// The layers and activations of Keras's image models, by Keras's names.
TEST(ModelConfigTest, ImageLayersAndKerasActivationsParse) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile("input_shape: [8, 8, 3]\n"
                           "layer { zero_padding2d { padding: [0, 1, 0, 1] } }\n"
                           "layer { conv2d { filters: 4 kernel_size: 3 strides: 2 activation: "
                           "swish } }\n"
                           "layer { name: \"Conv1_relu\" relu { max_value: 6 } }\n"
                           "layer { zero_padding2d {} }\n"
                           "layer { average_pool2d { pool_size: 2 padding: same } }\n"
                           "layer { activation { activation: gelu } }\n"
                           "layer { global_average_pool2d {} }\n"
                           "layer { dense { units: 5 activation: selu } }\n"
                           "layer { dense { units: 3 activation: softmax } }",
                           "m.pbtxt"));
  const NetworkSpec& m = f.job.model;
  ASSERT_EQ(m.layers.size(), 9u);
  EXPECT_EQ(m.layers[0].kind, LayerKind::kZeroPadding2D);
  EXPECT_EQ(m.layers[0].padding, (std::array<int, 4>{0, 1, 0, 1}));
  EXPECT_EQ(m.layers[1].activation, Activation::kSwish);
  EXPECT_FALSE(m.layers[1].relu);
  EXPECT_EQ(m.layers[2].kind, LayerKind::kReLU);
  EXPECT_EQ(m.layers[2].activation, Activation::kRelu6);
  EXPECT_EQ(m.layers[3].padding, (std::array<int, 4>{1, 1, 1, 1}));  // Keras's default
  EXPECT_EQ(m.layers[4].kind, LayerKind::kAveragePool2D);
  EXPECT_EQ(m.layers[5].activation, Activation::kGelu);
  EXPECT_EQ(m.layers[6].name, "global_average_pool2d_0");
  EXPECT_EQ(m.layers[8].activation, Activation::kSoftmax);
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(m, 2));
  EXPECT_EQ(net->shapes(), (std::vector<Shape>{{8, 8, 3}, {9, 9, 3}, {4, 4, 4}, {4, 4, 4},
                                               {6, 6, 4}, {3, 3, 4}, {3, 3, 4}, {4}, {5}, {3}}));

  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile("input_shape: [8, 8, 3]\n" + text, "m.pbtxt")
                           .status()
                           .message());
  };
  const std::string tail = "layer { flatten {} }\nlayer { dense { units: 2 } }";
  EXPECT_EQ(message("layer { relu { max_value: 4 } }\n" + tail),
            "m.pbtxt:2:16: layer 0 (relu_0): relu.max_value 4 is not 6: ReLU layers cap at 6 "
            "(relu6) or not at all");
  EXPECT_EQ(message("layer { zero_padding2d { padding: [1, 2, 3] } }\n" + tail),
            "m.pbtxt:2:26: layer 0 (zero_padding2d_0): zero_padding2d.padding has 3 values: one "
            "(every side), two ([rows, columns]) or four ([top, bottom, left, right])");
  EXPECT_EQ(message("layer { dense { units: 2 activation: softmax } }\n" + tail),
            "m.pbtxt:2:26: layer 0 (dense_0): dense.activation softmax is the last dense layer's "
            "only (the loss takes its logits)");
  EXPECT_EQ(message("layer { activation { activation: softmax } }\n" + tail),
            "m.pbtxt:2:22: layer 0 (activation_0): activation.activation softmax is the last "
            "dense layer's only (the loss takes its logits)");
  EXPECT_EQ(message("layer { global_max_pool2d {} }\n"
                    "layer { dense { units: 2 activation: tanh } }"),
            "m.pbtxt:3:26: layer 1 (dense_0): dense.activation must be empty or softmax: the last "
            "layer gives the logits of softmax cross-entropy");
}

// MobileNetV2's convolutions: depthwise ones and convolutions without a
// bias (before a batch normalization), with Keras's variable names.
TEST(ModelConfigTest, DepthwiseConvolutionsAndLayersWithoutABiasParse) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile("input_shape: [8, 8, 3]\n"
                           "layer { name: \"Conv1\" conv2d { filters: 4 kernel_size: 3 strides: 2 "
                           "padding: same use_bias: false } }\n"
                           "layer { name: \"dw\" depthwise_conv2d { kernel_size: 3 padding: same "
                           "depth_multiplier: 2 activation: relu6 } }\n"
                           "layer { name: \"project\" depthwise_conv2d { kernel_size: [1, 2] "
                           "use_bias: false } }\n"
                           "layer { global_average_pool2d {} }\n"
                           "layer { dense { units: 3 use_bias: false } }",
                           "m.pbtxt"));
  const NetworkSpec& m = f.job.model;
  EXPECT_FALSE(m.layers[0].use_bias);
  EXPECT_EQ(m.layers[1].kind, LayerKind::kDepthwiseConv2D);
  EXPECT_EQ(m.layers[1].depth_multiplier, 2);
  EXPECT_EQ(m.layers[1].activation, Activation::kRelu6);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const VariableDef& v : f.variables) {
    names.push_back(v.name);
    shapes.push_back(v.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Conv1/kernel", "dw/depthwise_kernel", "dw/bias",
                                             "project/depthwise_kernel", "dense_0/kernel"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{3, 3, 3, 4}, {3, 3, 4, 2}, {8}, {1, 2, 8, 1}, {8, 3}}));
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(m, 1));
  EXPECT_EQ(net->shapes()[2], (Shape{4, 4, 8}));
  EXPECT_EQ(net->shapes()[3], (Shape{4, 3, 8}));
  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile("input_shape: [8, 8, 3]\n" + text +
                                                "\nlayer { flatten {} }\nlayer { dense { units: 2 } }",
                                            "m.pbtxt")
                           .status()
                           .message());
  };
  EXPECT_EQ(message("layer { depthwise_conv2d { strides: 2 } }"),
            "m.pbtxt:2:1: layer 0 (depthwise_conv2d_0): depthwise_conv2d.kernel_size is missing");
  EXPECT_EQ(message("layer { depthwise_conv2d { kernel_size: 3 depth_multiplier: 0 } }"),
            "m.pbtxt:2:43: layer 0 (depthwise_conv2d_0): depthwise_conv2d.depth_multiplier 0 must "
            "be in 1..256");
  EXPECT_EQ(message("layer { depthwise_conv2d { kernel_size: 9 } }"),
            "m.pbtxt:2:28: layer 0 (depthwise_conv2d_0): depthwise_conv2d kernel 9x9 is longer "
            "than an input of 8x8 (valid padding): nothing is left to convolve");
}

TEST(ModelConfigTest, TheTextCnnConfigReadsItsTokensThroughAnEmbedding) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, LoadModelConfigFile("configs/text_cnn.pbtxt"));
  const NetworkSpec& m = f.job.model;
  EXPECT_EQ(m.input_dim, 0);  // no float features
  ASSERT_EQ(m.embeddings.size(), 1u);
  EXPECT_TRUE(m.embeddings[0].sequence);
  EXPECT_EQ(m.embeddings[0].name, "embedding");
  EXPECT_EQ(m.embeddings[0].ids_length, 300);
  EXPECT_EQ(m.embeddings[0].ids_offset, 0);
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_EQ(m.layers[0].kind, LayerKind::kConv1D);
  EXPECT_EQ(m.layers[0].window, (std::array<int, 2>{1, 5}));
  EXPECT_EQ(f.variables.back().name, "embedding/embeddings");
  EXPECT_EQ(f.variables.back().shape, (std::vector<int64_t>{20002, 7}));
  EXPECT_TRUE(f.variables.back().embedding);
}

// The text CNN with the three sizes that follow from its data left out:
// the corpus's vocab.txt and labels.txt give them, so the seed document's
// Reuters table (30,980 words + pad + out of vocabulary, 46 topics) needs
// no edit.
constexpr char kTextCnnSizedByItsData[] = R"(
input {
  format: tfrecord
  train_files: "train-*"
  test_files: "test-*"
  feature { name: "tokens" type: "int64" max_len: 300 }
}
layer { embedding { dim: 7 ids_from: "feature:tokens" } }
layer { conv1d { filters: 64 kernel_size: 5 activation: relu } }
layer { max_pool1d { pool_size: 2 } }
layer { conv1d { filters: 32 kernel_size: 3 activation: relu } }
layer { max_pool1d { pool_size: 2 } }
layer { flatten {} }
layer { dense {} }
)";

TEST(ModelConfigTest, SizesLeftOutComeFromTheDataFiles) {
  const std::string dir = testing::FreshTempDir("sized_by_data");
  std::string vocab;
  for (int i = 0; i < 30980; ++i) absl::StrAppend(&vocab, "w", i, "\n");
  ASSERT_OK(WriteFileAtomically(dir + "/vocab.txt", vocab));
  std::string labels;
  for (int i = 0; i < 46; ++i) absl::StrAppend(&labels, "topic", i, "\n");
  ASSERT_OK(WriteFileAtomically(dir + "/labels.txt", labels + "\n"));  // a blank line is none
  const DataSizes sizes = DataSizesOf(dir);
  EXPECT_EQ(sizes.vocabulary, 30982);
  EXPECT_EQ(sizes.classes, 46);
  EXPECT_EQ(DataSizesOf(dir + "/none").vocabulary, 0);

  ASSERT_OK_AND_ASSIGN(ModelConfigFile f,
                       ParseModelConfigFile(kTextCnnSizedByItsData, "seed.pbtxt", sizes));
  EXPECT_EQ(f.job.input.features.features[0].vocabulary, 30982);
  EXPECT_EQ(f.variables.back().shape, (std::vector<int64_t>{30982, 7}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> net, Network::Create(f.job.model, 1));
  int64_t params = 0;
  for (const VariableDef& v : net->variables()) params += v.elements();
  EXPECT_EQ(params, 332856);  // 216,874 + 2,304 + 6,176 + 107,502
  EXPECT_EQ(f.job.model.num_classes(), 46);

  // Without the data, each is named as missing, with where it may come from.
  absl::StatusOr<ModelConfigFile> bare = ParseModelConfigFile(kTextCnnSizedByItsData, "seed.pbtxt");
  EXPECT_THAT(std::string(bare.status().message()),
              ::testing::HasSubstr("vocab.txt in --data_dir"));
  DataSizes vocabulary_only;
  vocabulary_only.vocabulary = 30982;
  bare = ParseModelConfigFile(kTextCnnSizedByItsData, "seed.pbtxt", vocabulary_only);
  EXPECT_THAT(std::string(bare.status().message()),
              ::testing::HasSubstr("dense.units is missing (the last layer's may be left to the "
                                   "data: a labels.txt in --data_dir gives the classes)"));
}

TEST(ModelConfigTest, AFeatureIsPaddedAndCutWhereItsConfigSays) {
  auto config = [](const std::string& how) {
    return absl::StrCat(
        "input { format: tfrecord train_files: \"t*\" test_files: \"s*\"\n"
        "  feature { name: \"tokens\" type: \"int64\" max_len: 8 vocabulary: 20 ",
        how,
        " } }\n"
        "layer { embedding { vocabulary: 20 dim: 2 ids_from: \"feature:tokens\" } }\n"
        "layer { flatten {} }\nlayer { dense { units: 2 } }\n");
  };
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile keras,
      ParseModelConfigFile(config("padding: \"pre\" truncating: \"pre\""), "k"));
  EXPECT_TRUE(keras.job.input.features.features[0].pad_front);
  EXPECT_TRUE(keras.job.input.features.features[0].truncate_front);
  ASSERT_OK_AND_ASSIGN(ModelConfigFile plain,
                       ParseModelConfigFile(config("padding: \"post\""), "p"));
  EXPECT_FALSE(plain.job.input.features.features[0].pad_front);
  EXPECT_FALSE(plain.job.input.features.features[0].truncate_front);
  EXPECT_THAT(std::string(
                  ParseModelConfigFile(config("truncating: \"front\""), "b").status().message()),
              ::testing::HasSubstr("Unknown enumeration value of \"front\" for field \"truncating\""));
}

TEST(ModelConfigTest, TableUpdatesAreLazyUnlessTheOptimizerSaysDense) {
  const std::string layers = "input_dim: 4\nlayer { dense { units: 2 } }\n";
  ASSERT_OK_AND_ASSIGN(ModelConfigFile lazy,
                       ParseModelConfigFile(layers + "optimizer { name: \"adam\" }", "l"));
  EXPECT_FALSE(lazy.job.optimizer.dense_table_updates);
  for (const char* how : {"dense", "\"dense\""}) {
    ASSERT_OK_AND_ASSIGN(
        ModelConfigFile dense,
        ParseModelConfigFile(
            layers + absl::StrCat("optimizer { name: \"nadam\" table_updates: ", how, " }"), "d"));
    EXPECT_TRUE(dense.job.optimizer.dense_table_updates) << how;
  }
  EXPECT_THAT(
      std::string(ParseModelConfigFile(
                      layers + "optimizer { name: \"ftrl\" table_updates: dense }", "f")
                      .status()
                      .message()),
      ::testing::HasSubstr("optimizer.table_updates dense is not for ftrl"));
}

TEST(ModelConfigTest, GivenSizesReplaceTheConfigsOwnOnlyWhenAskedTo) {
  // configs/text_cnn.pbtxt states the Debian corpus's sizes (20,002 and 51).
  DataSizes fill{30982, 46};
  ASSERT_OK_AND_ASSIGN(ModelConfigFile kept, LoadModelConfigFile("configs/text_cnn.pbtxt", fill));
  EXPECT_EQ(kept.variables.back().shape, (std::vector<int64_t>{20002, 7}));
  EXPECT_EQ(kept.job.model.num_classes(), 51);
  DataSizes replace = fill;
  replace.replace_vocabulary = replace.replace_classes = true;
  ASSERT_OK_AND_ASSIGN(ModelConfigFile seed, LoadModelConfigFile("configs/text_cnn.pbtxt", replace));
  EXPECT_EQ(seed.variables.back().shape, (std::vector<int64_t>{30982, 7}));
  EXPECT_EQ(seed.job.input.features.features[0].vocabulary, 30982);
  EXPECT_EQ(seed.job.model.num_classes(), 46);
  // A sigmoid loss over two classes takes one logit.
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile binary,
      ParseModelConfigFile("input_dim: 4\nloss: sigmoid_cross_entropy\nlayer { dense {} }\n",
                           "b.pbtxt", DataSizes{0, 2}));
  EXPECT_EQ(binary.job.model.layers.back().units, 1);
}

TEST(ModelConfigTest, TheClickModelPutsEightEmbeddingsSideBySide) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, LoadModelConfigFile("configs/click_model.pbtxt"));
  const NetworkSpec& m = f.job.model;
  EXPECT_TRUE(m.binary());
  ASSERT_EQ(m.embeddings.size(), 8u);
  const std::vector<std::string> names = {"user",     "item",   "site", "category",
                                          "position", "device", "hour", "weekday"};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(m.embeddings[i].name, names[i]);
    EXPECT_EQ(m.embeddings[i].feature(), names[i]);
    EXPECT_EQ(m.embeddings[i].ids_offset, static_cast<int64_t>(i));  // one id each
    EXPECT_EQ(m.embeddings[i].ids_length, 1);
    EXPECT_FALSE(m.embeddings[i].sequence);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Network> net, Network::Create(m, 4));
  EXPECT_EQ(net->input_width(), 4 * 8 + 4 * 4);
  EXPECT_EQ(net->shapes()[1], (Shape{64}));
  // The dense layers in the flat array, then the eight tables.
  ASSERT_EQ(f.variables.size(), 6u + 8u);
  EXPECT_EQ(f.variables[6].name, "user/embeddings");
  EXPECT_EQ(f.variables[6].shape, (std::vector<int64_t>{5001, 8}));
  EXPECT_EQ(f.variables[13].name, "weekday/embeddings");
  EXPECT_EQ(net->num_parameters(), 48 * 64 + 64 + 64 * 32 + 32 + 32 + 1);
}

TEST(ModelConfigTest, SeveralEmbeddingsAreNamedAsKerasNamesThemAndASequenceStandsAlone) {
  const std::string input =
      "input {\n format: \"tfrecord\" train_files: \"a\" test_files: \"b\"\n"
      " feature { name: \"u\" type: \"int64\" vocabulary: 10 }\n"
      " feature { name: \"w\" type: \"int64\" max_len: 4 vocabulary: 10 }\n}\n";
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile(
          input + "layer { embedding_bag { vocabulary: 10 dim: 2 ids_from: \"feature:u\" } }\n"
                  "layer { embedding_bag { vocabulary: 10 dim: 3 ids_from: \"feature:w\" } }\n"
                  "layer { dense { units: 2 } }",
          "m.pbtxt"));
  ASSERT_EQ(f.job.model.embeddings.size(), 2u);
  EXPECT_EQ(f.job.model.embeddings[0].name, "embedding");
  EXPECT_EQ(f.job.model.embeddings[1].name, "embedding_1");
  EXPECT_EQ(f.job.model.embeddings[1].ids_offset, 1);
  EXPECT_EQ(f.job.model.embeddings[1].ids_length, 4);
  EXPECT_EQ(f.variables[2].name, "embedding/embeddings");
  EXPECT_EQ(f.variables[3].name, "embedding_1/embeddings");
  EXPECT_EQ(f.variables[0].shape, (std::vector<int64_t>{5, 2}));  // 2 + 3 wide
  EXPECT_EQ(
      std::string(
          ParseModelConfigFile(
              input + "layer { embedding_bag { vocabulary: 10 dim: 2 ids_from: \"feature:u\" } }\n"
                      "layer { embedding { vocabulary: 10 dim: 3 ids_from: \"feature:w\" } }\n"
                      "layer { flatten {} }\nlayer { dense { units: 2 } }",
              "m.pbtxt")
              .status()
              .message()),
      "m.pbtxt:7:1: layer 1 (embedding_1): embedding embedding_1: a sequence embedding ([T, dim]) "
      "must be the model's only embedding; several are concatenated flat, so make each an "
      "embedding_bag");
}

TEST(ModelConfigTest, AnEmbeddingNotFedByAnIdFeatureIsNamed) {
  auto message = [](const std::string& layer) {
    const std::string text =
        "input {\n format: \"tfrecord\" train_files: \"a\" test_files: \"b\"\n"
        " feature { name: \"x\" length: 2 }\n"
        " feature { name: \"w\" type: \"int64\" max_len: 4 vocabulary: 10 }\n}\n" +
        layer + "\nlayer { flatten {} }\nlayer { dense { units: 2 } }";
    return std::string(ParseModelConfigFile(text, "m.pbtxt").status().message());
  };
  EXPECT_EQ(message("layer { embedding { vocabulary: 10 dim: 2\n  ids_from: \"feature:x\" } }"),
            "m.pbtxt:7:3: layer 0 (embedding): embedding.ids_from feature \"x\" is float: an "
            "embedding reads an int64 or string feature (ids)");
  EXPECT_EQ(message("layer { embedding { vocabulary: 10 dim: 2\n  ids_from: \"feature:v\" } }"),
            "m.pbtxt:7:3: layer 0 (embedding): embedding.ids_from the input has no feature \"v\"");
  EXPECT_EQ(message("layer { embedding { vocabulary: 10 dim: 2\n  ids_from: \"pixel_buckets:2\" "
                    "} }"),
            "m.pbtxt:7:3: layer 0 (embedding): embedding.ids_from \"pixel_buckets:2\" is not "
            "feature:NAME");
  EXPECT_EQ(message("layer { embedding {\n  vocabulary: 8 dim: 2 ids_from: \"feature:w\" } }"),
            "m.pbtxt:7:3: layer 0 (embedding): embedding.vocabulary 8 is smaller than the "
            "vocabulary of 10 ids feature \"w\" gives");
  EXPECT_EQ(message("layer { embedding { vocabulary: 10 dim: 2 ids_from: \"feature:w\"\n  "
                    "input_length: 5 } }"),
            "m.pbtxt:7:3: layer 0 (embedding): embedding.input_length 5 is not the length of "
            "feature \"w\" (4)");
  // The embedding's output is a sequence: dense needs flatten first.
  EXPECT_EQ(
      std::string(ParseModelConfigFile(
                      "input {\n format: \"tfrecord\" train_files: \"a\" test_files: \"b\"\n"
                      " feature { name: \"w\" type: \"int64\" max_len: 4 vocabulary: 10 }\n}\n"
                      "layer { embedding { vocabulary: 10 dim: 2 ids_from: \"feature:w\" } }\n"
                      "layer { dense { units: 2 } }",
                      "m.pbtxt")
                      .status()
                      .message()),
      "m.pbtxt:6:1: layer 1 (dense_0): dense needs a flat [N] input but its input is [4, 2]: put "
      "flatten or global_average_pool1d before it");
  // Not first.
  EXPECT_EQ(std::string(ParseModelConfigFile(
                            "input_dim: 4\nlayer { dense { units: 3 } }\n"
                            "layer { embedding { vocabulary: 10 dim: 2 ids_from: \"feature:w\" } }",
                            "m.pbtxt")
                            .status()
                            .message()),
            "m.pbtxt:3:1: layer 1 (embedding): an embedding layer must come before every other "
            "kind of layer: it reads the input's ids");
}

TEST(ModelConfigTest, FieldsLeftOutKeepTheJobDefaults) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile(
          R"pb(
            input_dim: 4
            layer { dense { units: 3 activation: "relu" kernel_initializer: "uniform:0.1" } }
            layer {
              name: "logits"
              dense { units: 2 input_dim: 3 }
            }
            optimizer { name: "momentum" nesterov: true }
            steps: 50
            consistency: "ssp:2"
          )pb",
          "m.pbtxt"));
  const JobSpec defaults;
  EXPECT_EQ(f.job.model.layers[0].name, "dense_0");
  EXPECT_EQ(f.job.model.layers[0].kernel_initializer, "uniform:0.1");
  EXPECT_EQ(f.job.model.layers[1].name, "logits");
  EXPECT_EQ(f.variables[2].name, "logits/kernel");
  EXPECT_EQ(f.job.optimizer.name, "momentum");
  EXPECT_TRUE(f.job.optimizer.nesterov);
  EXPECT_EQ(f.job.optimizer.momentum, defaults.optimizer.momentum);
  EXPECT_EQ(f.job.optimizer.learning_rate, defaults.optimizer.learning_rate);
  EXPECT_EQ(f.job.batch_size, defaults.batch_size);
  EXPECT_EQ(f.job.max_steps, 50);
  EXPECT_EQ(f.job.consistency, Consistency::Ssp(2));
}

// The closed sets are enums: written bare, or quoted as configs wrote them
// before (and "" for unset), they read the same.
TEST(ModelConfigTest, QuotedAndBareValuesOfAClosedSetReadTheSame) {
  const std::string bare =
      "input_dim: 8\ninput_shape: [8, 1]\n"
      "layer { conv1d { filters: 2 kernel_size: 2 padding: same activation: relu } }\n"
      "layer { max_pool1d { padding: same } }\nlayer { flatten {} }\n"
      "layer { dense { units: 3 } }\nloss: softmax_cross_entropy\n";
  const std::string quoted =
      "input_dim: 8\ninput_shape: [8, 1]\n"
      "layer { conv1d { filters: 2 kernel_size: 2 padding: \"same\" activation: \"relu\" } }\n"
      "layer { max_pool1d { padding: \"same\" } }\nlayer { flatten {} }\n"
      "layer { dense { units: 3 activation: \"\" } }\nloss: \"softmax_cross_entropy\"\n";
  ASSERT_OK_AND_ASSIGN(ModelConfigFile a, ParseModelConfigFile(bare, "a.pbtxt"));
  ASSERT_OK_AND_ASSIGN(ModelConfigFile b, ParseModelConfigFile(quoted, "b.pbtxt"));
  ASSERT_EQ(a.job.model.layers.size(), b.job.model.layers.size());
  for (size_t l = 0; l < a.job.model.layers.size(); ++l) {
    EXPECT_EQ(a.job.model.layers[l].same_padding, b.job.model.layers[l].same_padding) << l;
    EXPECT_EQ(a.job.model.layers[l].relu, b.job.model.layers[l].relu) << l;
  }
  EXPECT_TRUE(a.job.model.layers[0].same_padding);
  EXPECT_TRUE(a.job.model.layers[0].relu);
  EXPECT_TRUE(a.job.model.layers[1].same_padding);
  EXPECT_FALSE(b.job.model.layers[3].relu);
}

// Keras's BatchNormalization arguments, `trainable: false` on any layer,
// and what is out of range named at its field.
TEST(ModelConfigTest, BatchNormalizationTakesKerassArgumentsAndLayersMayBeFrozen) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, ParseModelConfigFile(R"pb(
    input_dim: 48
    input_shape: [4, 4, 3]
    layer { name: "conv" conv2d { filters: 4 kernel_size: 3 use_bias: false } trainable: false }
    layer { name: "bn" batch_normalization { momentum: 0.999 epsilon: 1e-5 center: false axis: 3 } }
    layer { name: "bn_default" batch_normalization {} }
    layer { name: "scale" rescaling { scale: 0.5 offset: -1 } }
    layer { global_average_pool2d {} }
    layer { dense { units: 2 } }
  )pb", "bn.pbtxt"));
  const std::vector<LayerSpec>& layers = f.job.model.layers;
  EXPECT_FALSE(layers[0].trainable);
  EXPECT_EQ(layers[1].kind, LayerKind::kBatchNormalization);
  EXPECT_FLOAT_EQ(layers[1].momentum, 0.999f);
  EXPECT_FLOAT_EQ(layers[1].epsilon, 1e-5f);
  EXPECT_FALSE(layers[1].center);
  EXPECT_TRUE(layers[1].scale);
  EXPECT_TRUE(layers[1].trainable);
  EXPECT_FLOAT_EQ(layers[2].momentum, 0.99f);  // Keras's defaults
  EXPECT_FLOAT_EQ(layers[2].epsilon, 1e-3f);
  EXPECT_TRUE(layers[2].center);
  EXPECT_EQ(layers[3].kind, LayerKind::kRescaling);
  EXPECT_FLOAT_EQ(layers[3].rescale, 0.5f);
  EXPECT_FLOAT_EQ(layers[3].offset, -1.0f);
  EXPECT_EQ(std::string(ParseModelConfigFile("input_dim: 4\nlayer { rescaling { offset: 1 } }\n"
                                             "layer { dense { units: 2 } }",
                                             "m.pbtxt")
                            .status()
                            .message()),
            "m.pbtxt:2:1: layer 0 (rescaling_0): rescaling.scale is missing");
  auto message = [](const std::string& bn) {
    return std::string(
        ParseModelConfigFile("input_dim: 48\ninput_shape: [4, 4, 3]\nlayer { batch_normalization { " +
                                 bn + " } }\nlayer { flatten {} }\nlayer { dense { units: 2 } }",
                             "m.pbtxt")
            .status()
            .message());
  };
  EXPECT_EQ(message("momentum: 1.5"),
            "m.pbtxt:3:31: layer 0 (batch_normalization_0): batch_normalization.momentum 1.5 is "
            "not in [0, 1]");
  EXPECT_EQ(message("epsilon: 0"),
            "m.pbtxt:3:31: layer 0 (batch_normalization_0): batch_normalization.epsilon 0 must be "
            "above 0");
  EXPECT_EQ(message("axis: 1"),
            "m.pbtxt:3:31: layer 0 (batch_normalization_0): batch_normalization.axis 1 is not the "
            "last axis (-1, or 3 for an input of [4, 4, 3]): batch_normalization normalises the "
            "channel axis only");
}

TEST(ModelConfigTest, BadModelSpecsNameTheLineAndTheField) {
  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile(text, "m.pbtxt").status().message());
  };
  // An unknown layer type is a field the parser does not know.
  EXPECT_EQ(message("input_dim: 4\nlayer { conv { filters: 3 } }"),
            "m.pbtxt:2:14: Message type \"pstrain.v1.LayerConfig\" has no field named \"conv\".");
  EXPECT_EQ(message("input_dim: 4\nlayer { name: \"x\" }"),
            "m.pbtxt:2:1: layer 0 (x): no layer type is given (dense, conv1d, conv2d, "
            "max_pool1d, max_pool2d, global_average_pool1d, flatten, dropout, add, concatenate, "
            "global_average_pool2d, global_max_pool2d, average_pool2d, zero_padding2d, "
            "activation, relu, depthwise_conv2d, batch_normalization, rescaling, embedding or "
            "embedding_bag)");
  EXPECT_EQ(
      message(
          "input_dim: 4\nlayer { dense { units: 3 } }\nlayer { dense { activation: \"relu\" } }"),
      "m.pbtxt:3:1: layer 1 (dense_1): dense.units is missing (the last layer's may be left to "
      "the data: a labels.txt in --data_dir gives the classes)");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { } }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:2:1: layer 0 (dense_0): dense.units is missing");
  // Given as 0: not missing, but out of range, named at the field.
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 3 } }\nlayer { dense { units: 0 } }"),
            "m.pbtxt:3:17: layer 1 (dense_1): dense.units 0 must be positive, at most 65536 (units "
            "per example)");
  EXPECT_EQ(message("layer { dense { units: 3 } }"),
            "m.pbtxt:1:1: input_dim is missing (the width of each example, 784 for Fashion-MNIST)");
  // Shapes that do not chain.
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 8 activation: \"relu\" } }\n"
                    "layer { dense {\n  units: 2\n  input_dim: 6 } }"),
            "m.pbtxt:5:3: layer 1 (dense_1): dense.input_dim 6 does not chain: the layer before "
            "gives [8]");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { input_dim: 5 units: 2 } }"),
            "m.pbtxt:2:17: layer 0 (dense_0): dense.input_dim 5 does not chain: the input is [4]");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 activation: \"leaky_relu\" } }"),
            "m.pbtxt:2:39: Unknown enumeration value of \"leaky_relu\" for field \"activation\". "
            "It is one of: relu, relu6, sigmoid, tanh, elu, selu, gelu, swish, silu, linear, "
            "softmax.");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 activation: \"relu\" } }"),
            "m.pbtxt:2:26: layer 0 (dense_0): dense.activation must be empty or softmax: the "
            "last layer gives the logits of softmax cross-entropy");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 kernel_initializer: \"he\" } }"),
            "m.pbtxt:2:26: layer 0 (dense_0): dense.kernel_initializer \"he\" is not "
            "glorot_uniform, zeros, ones or uniform:A (A >= 0)");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\nloss: \"mse\""),
            "m.pbtxt:3:8: Unknown enumeration value of \"mse\" for field \"loss\". It is one of: "
            "softmax_cross_entropy, sigmoid_cross_entropy.");
  // The closed sets may be written bare, as enums are.
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\nloss: mse"),
            "m.pbtxt:3:7: Unknown enumeration value of \"mse\" for field \"loss\". It is one of: "
            "softmax_cross_entropy, sigmoid_cross_entropy.");
  // A sigmoid loss takes one logit.
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\nloss: \"sigmoid_cross_entropy\""),
            "m.pbtxt:2:17: layer 0 (dense_0): dense.units 2 must be 1: a sigmoid loss takes one "
            "logit (labels 0 and 1)");
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile click,
      ParseModelConfigFile(
          "input_dim: 4\nlayer { dense { units: 1 } }\nloss: \"sigmoid_cross_entropy\"",
          "m.pbtxt"));
  EXPECT_TRUE(click.job.model.binary());
  EXPECT_EQ(click.job.model.num_classes(), 2);
  EXPECT_EQ(
      message("input_dim: 4\nlayer { dense { units: 2 } }\noptimizer { name: \"rmsprop\" }"),
      "m.pbtxt:3:13: optimizer.name \"rmsprop\" is not sgd, momentum, adagrad, adam, nadam or "
      "ftrl");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\noptimizer { learning_rate: 0.1 }"),
            "m.pbtxt:3:1: optimizer.name is missing (sgd, momentum, adagrad, adam, nadam or ftrl)");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\n"
                    "optimizer { name: \"adam\" beta2: 1.5 }"),
            "m.pbtxt:3:26: optimizer.beta2 1.5 must be in [0, 1)");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\nbatch_size: 0"),
            "m.pbtxt:3:1: batch_size 0 must be in 1..65536");
  EXPECT_EQ(message("input_dim: 4\nlayer { dense { units: 2 } }\nconsistency: \"sometimes\""),
            "m.pbtxt:3:1: consistency \"sometimes\" is not one of async, sync, ssp:S (S an "
            "integer from 0 to 1000000)");
  EXPECT_EQ(message("variable { name: \"a\" shape: 1 }\nbatch_size: 4"),
            "m.pbtxt:2:1: batch_size is set but there are no layers to train");
  EXPECT_EQ(
      message("variable { name: \"a\" shape: 1 }\ninput_dim: 1\nlayer { dense { units: 2 } }"),
      "m.pbtxt:3:1: a config lists variables or describes layers, not both");
}

TEST(ModelConfigTest, EmbeddingBagLayerComesFirstAndFeedsTheDenseLayers) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile f,
      ParseModelConfigFile(
          R"pb(
            input_dim: 784
            layer {
              name: "pixels"
              embedding_bag { vocabulary: 3136 dim: 32 ids_from: "pixel_buckets:4" }
            }
            layer { dense { units: 64 activation: "relu" } }
            layer { dense { units: 10 } }
          )pb",
          "m.pbtxt"));
  ASSERT_EQ(f.job.model.embeddings.size(), 1u);
  const EmbeddingBagSpec& bag = f.job.model.embeddings[0];
  EXPECT_EQ(bag.name, "pixels");
  EXPECT_EQ(bag.vocabulary, 3136);
  EXPECT_EQ(bag.dim, 32);
  EXPECT_EQ(bag.combiner, EmbeddingBagSpec::Combiner::kMean);
  EXPECT_EQ(bag.initializer, "uniform:0.05");
  EXPECT_EQ(f.job.model.layers[0].name, "dense_0");
  ASSERT_EQ(f.variables.size(), 5u);
  EXPECT_EQ(f.variables[0].shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(f.variables[4].name, "pixels/embeddings");
  EXPECT_TRUE(f.variables[4].embedding);

  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile(text, "m.pbtxt").status().message());
  };
  EXPECT_EQ(
      message("input_dim: 4\nlayer { dense { units: 3 } }\n"
              "layer { embedding_bag { vocabulary: 8 dim: 2 ids_from: \"pixel_buckets:2\" } }"),
      "m.pbtxt:3:1: layer 1 (embedding): an embedding_bag layer must come before every other kind "
      "of layer: it reads "
      "the input's ids");
  EXPECT_EQ(message("input_dim: 4\nlayer { embedding_bag {\n  vocabulary: 7\n  dim: 2\n"
                    "  ids_from: \"pixel_buckets:2\" } }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:3:3: layer 0 (embedding): embedding_bag.vocabulary 7 is smaller than the 8 "
            "ids that pixel_buckets:2 gives for 4 features");
  EXPECT_EQ(message("input_dim: 4\nlayer { embedding_bag { vocabulary: 8 dim: 2\n"
                    "  ids_from: \"words\" } }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:3:3: layer 0 (embedding): embedding_bag.ids_from \"words\" is not "
            "feature:NAME or pixel_buckets:B with B in 1..256");
  EXPECT_EQ(
      message(
          "input_dim: 4\nlayer { embedding_bag { vocabulary: 8 ids_from: \"pixel_buckets:2\" } }"),
      "m.pbtxt:2:1: layer 0 (embedding): embedding_bag.dim is missing");
  EXPECT_EQ(message("input_dim: 4\nlayer { embedding_bag { vocabulary: 8 dim: 2 combiner: \"max\" "
                    "ids_from: \"pixel_buckets:2\" } }\nlayer { dense { units: 2 } }"),
            "m.pbtxt:2:57: Unknown enumeration value of \"max\" for field \"combiner\". It is "
            "one of: mean, sum.");
  EXPECT_EQ(message("input_dim: 4\nlayer { embedding_bag { vocabulary: 8 dim: 2 "
                    "ids_from: \"pixel_buckets:2\" } }"),
            "m.pbtxt:2:1: the model has no dense layer: the last one gives the logits");
}

TEST(ModelConfigTest, AnInputBlockReadsTfRecordsThroughAFeatureSpec) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile file,
                       LoadModelConfigFile("configs/fashion_mnist_tfrecord.pbtxt"));
  const data::InputSpec& in = file.job.input;
  EXPECT_EQ(in.format, data::InputFormat::kTfRecord);
  EXPECT_EQ(in.train_files, "train-*.tfrecord*");
  EXPECT_EQ(in.test_files, "test-*.tfrecord*");
  ASSERT_EQ(in.features.features.size(), 1u);
  EXPECT_EQ(in.features.features[0].name, "image");
  EXPECT_EQ(in.features.features[0].length, 784);
  EXPECT_EQ(in.features.label, "label");
  EXPECT_FALSE(in.skip_bad_records);
  // input_dim left out: the float features' width.
  EXPECT_EQ(file.job.model.input_dim, 784);
  // The model is the default job's.
  EXPECT_EQ(file.job.model.layers.size(), 2u);
  EXPECT_EQ(file.job.model.layers[0].units, 128);

  const std::string layers = "layer { dense { units: 10 } }\n";
  auto error = [&](const std::string& input, const std::string& extra = "") {
    auto f = ParseModelConfigFile(extra + input + layers, "m.pbtxt");
    return f.ok() ? std::string("ok") : std::string(f.status().message());
  };
  const std::string files = "format: \"tfrecord\" train_files: \"a*\" test_files: \"b*\"\n";
  EXPECT_EQ(error("input {\n" + files + " feature { name: \"x\" length: 3 }\n}\n"), "ok");
  EXPECT_EQ(
      error("input {\n" + files + " feature { name: \"x\" length: 3 }\n}\n", "input_dim: 4\n"),
      "m.pbtxt:1:1: input_dim 4 is not the width of the input's float features (3)");
  EXPECT_EQ(error("input {\n" + files + " feature { name: \"x\" type: \"double\" }\n}\n"),
            "m.pbtxt:3:2: input: type \"double\" is not one of float, int64, string");
  EXPECT_EQ(error("input {\n" + files +
                  " feature { name: \"x\" }\n feature { name: \"w\" type: \"string\" }\n}\n"),
            "m.pbtxt:4:2: input: feature \"w\": a string feature needs one of "
            "vocabulary_file and hash_buckets to map its tokens to ids");
  EXPECT_EQ(
      error("input {\n" + files +
            " feature { name: \"x\" }\n feature { name: \"w\" type: \"int64\" max_len: 5 }\n}\n"),
      "m.pbtxt:1:1: no layer reads the input's id features (w): an embedding or "
      "embedding_bag layer with ids_from: \"feature:NAME\" reads one");
  EXPECT_EQ(error("input { format: \"tfrecord\" test_files: \"b\" feature { name: \"x\" } }\n"),
            "m.pbtxt:1:1: input.train_files is missing (a glob)");
  EXPECT_EQ(error("input { format: \"parquet\" }\n", "input_dim: 1\n"),
            "m.pbtxt:2:18: Unknown enumeration value of \"parquet\" for field \"format\". It is "
            "one of: idx, tfrecord, csv, tsv, tfds.");
  const std::string idx_only =
      "m.pbtxt:2:1: input: train_files, test_files, feature and shuffle_buffer are for format "
      "\"tfrecord\", \"csv\" or \"tsv\" (the IDX files of the data directory need none)";
  EXPECT_EQ(error("input { train_files: \"a\" }\n", "input_dim: 1\n"), idx_only);
  EXPECT_EQ(error("input { shuffle_buffer: 100 }\n", "input_dim: 1\n"), idx_only);
  EXPECT_EQ(error("input { format: \"tfrecord\" train_files: \"a\" test_files: \"b\"\n"
                  "  shuffle_buffer: -5 feature { name: \"x\" } }\n"),
            "m.pbtxt:2:3: input: shuffle_buffer -5 is not in 0..2^30 (0 holds the training files "
            "in memory)");
}

// `input` (a config's settings) with one dense layer, parsed as m.pbtxt.
absl::StatusOr<ModelConfigFile> ParseDense(const std::string& input) {
  return ParseModelConfigFile(input + "layer { dense { units: 10 } }\n", "m.pbtxt");
}
// The error of ParseDense(input), or "ok".
std::string ErrorOf(const std::string& input) {
  auto f = ParseDense(input);
  return f.ok() ? std::string("ok") : std::string(f.status().message());
}

// Keras's learning-rate schedules, by the names Keras gives them.
TEST(ModelConfigTest, OptimizerTakesKerasLearningRateSchedules) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile decayed,
      ParseDense(
          "optimizer { name: \"adam\" learning_rate: 0.01\n"
          "  schedule { exponential_decay { decay_steps: 100 decay_rate: 0.9 staircase: true } } "
          "}\ninput_dim: 4\n"));
  EXPECT_EQ(decayed.job.optimizer.schedule, "exponential_decay");
  EXPECT_EQ(decayed.job.optimizer.decay_steps, 100);
  EXPECT_EQ(decayed.job.optimizer.decay_rate, 0.9f);
  EXPECT_TRUE(decayed.job.optimizer.staircase);
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile piecewise,
      ParseDense("optimizer { name: \"sgd\" schedule { piecewise_constant {\n"
                 "  boundaries: [1000, 2000] values: [0.1, 0.01, 0.001] } } }\ninput_dim: 4\n"));
  EXPECT_EQ(piecewise.job.optimizer.boundaries, (std::vector<int64_t>{1000, 2000}));
  EXPECT_EQ(piecewise.job.optimizer.values, (std::vector<float>{0.1f, 0.01f, 0.001f}));
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile cosine,
      ParseDense(
          "optimizer { name: \"sgd\" schedule { cosine_decay { decay_steps: 50 alpha: 0.1 } } "
          "}\ninput_dim: 4\n"));
  EXPECT_EQ(cosine.job.optimizer.schedule, "cosine_decay");
  EXPECT_EQ(cosine.job.optimizer.alpha, 0.1f);
  EXPECT_EQ(
      ErrorOf(
          "optimizer { name: \"sgd\" schedule { cosine_decay { alpha: 0.1 } } }\ninput_dim: 4\n"),
      "m.pbtxt:1:25: optimizer.schedule learning-rate schedule cosine_decay: decay_steps 0 "
      "must be 1 or more");
  ASSERT_OK_AND_ASSIGN(ModelConfigFile clipped,
                       ParseDense("optimizer { name: \"sgd\" clipnorm: 1.5 }\ninput_dim: 4\n"));
  EXPECT_EQ(clipped.job.optimizer.clipnorm, 1.5f);
  EXPECT_EQ(ErrorOf("optimizer { name: \"sgd\" clipnorm: 1 clipvalue: 1 }\ninput_dim: 4\n"),
            "m.pbtxt:1:37: optimizer.clipvalue give clipnorm or clipvalue, not both (as Keras)");
  EXPECT_EQ(ErrorOf("optimizer { name: \"sgd\" clipvalue: -1 }\ninput_dim: 4\n"),
            "m.pbtxt:1:25: optimizer.clipvalue -1 must be a positive finite number");
  // A model with an embedding table: refused, its rows are not clipped.
  absl::StatusOr<ModelConfigFile> with_table = ParseModelConfigFile(
      "input { format: tfrecord train_files: \"t*\" test_files: \"s*\"\n"
      "  feature { name: \"tokens\" type: \"int64\" max_len: 8 vocabulary: 20 } }\n"
      "layer { embedding { vocabulary: 20 dim: 2 ids_from: \"feature:tokens\" } }\n"
      "layer { flatten {} }\nlayer { dense { units: 2 } }\n"
      "optimizer { name: \"sgd\" clipnorm: 1 }\n",
      "m.pbtxt");
  EXPECT_EQ(with_table.status().message(),
            "m.pbtxt:6:1: optimizer clipnorm and clipvalue clip the dense variables' gradients; a "
            "model with embedding tables cannot take them yet (their row gradients are not "
            "clipped)");
  EXPECT_EQ(ErrorOf("optimizer { name: \"sgd\" schedule { } }\ninput_dim: 4\n"),
            "m.pbtxt:1:25: optimizer.schedule names no schedule (exponential_decay, "
            "inverse_time_decay, cosine_decay or piecewise_constant)");
}

// A TensorFlow Datasets input with images resized to the model's input
// (configs/fashion_mnist_tfds.pbtxt): the application takes the image's
// shape, --input_shape sets both; and what does not go together is named.
TEST(ModelConfigTest, ATfdsInputOfResizedImagesFeedsItsApplication) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, LoadModelConfigFile("configs/fashion_mnist_tfds.pbtxt"));
  const data::InputSpec& in = f.job.input;
  EXPECT_EQ(in.format, data::InputFormat::kTfds);
  EXPECT_EQ(in.train_split, "train[:80%]");
  EXPECT_EQ(in.test_split, "train[80%:]");
  ASSERT_EQ(in.features.features.size(), 1u);
  const data::FeatureDef& image = in.features.features[0];
  EXPECT_EQ(image.decode, data::FeatureDecode::kJpeg);
  EXPECT_EQ(image.image_shape, (std::vector<int64_t>{32, 32, 3}));
  EXPECT_EQ(image.length, 32 * 32 * 3);
  EXPECT_EQ(image.resize, data::ResizeMethod::kBilinear);
  EXPECT_EQ(f.job.model.input_shape, (Shape{32, 32, 3}));
  // No layers in front: the image is the application's input already.
  EXPECT_EQ(f.job.model.layers[0].name, "Conv1");

  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile("configs/fashion_mnist_tfds.pbtxt"));
  DataSizes sizes;
  sizes.input_shape = {48, 48, 3};
  ASSERT_OK_AND_ASSIGN(ModelConfigFile big, ParseModelConfigFile(text, "t.pbtxt", sizes));
  EXPECT_EQ(big.job.input.features.features[0].image_shape, (std::vector<int64_t>{48, 48, 3}));
  EXPECT_EQ(big.job.input.features.features[0].length, 48 * 48 * 3);
  EXPECT_EQ(big.job.model.input_shape, (Shape{48, 48, 3}));

  auto error = [](const std::string& input) {
    auto got = ParseModelConfigFile(input + "input_dim: 12\nlayer { dense { units: 2 } }\n",
                                    "m.pbtxt");
    return got.ok() ? std::string("ok") : std::string(got.status().message());
  };
  EXPECT_EQ(error("input { format: tfds feature { name: \"x\" length: 12 } }\n"), "ok");
  EXPECT_EQ(error("input { format: tfds train_files: \"a\" feature { name: \"x\" } }\n"),
            "m.pbtxt:1:1: input: format \"tfds\" reads the shards its dataset_info.json lists "
            "(the data directory is the dataset's version directory): name splits with "
            "train_split and test_split, not train_files and test_files");
  EXPECT_EQ(error("input { format: tfrecord train_files: \"a\" test_files: \"b\" "
                  "train_split: \"train\" feature { name: \"x\" } }\n"),
            "m.pbtxt:1:1: input: train_split and test_split slice a TensorFlow Datasets "
            "directory (format \"tfds\"); files are named by train_files and test_files");
  EXPECT_EQ(error("input { format: tfds feature { name: \"x\" length: 12 resize: \"area\" } }\n"),
            "m.pbtxt:1:22: input: feature \"x\": resize needs an image_shape");
  EXPECT_EQ(error("input { format: tfds feature { name: \"x\" decode: \"raw_uint8\" "
                  "image_shape: [2, 2, 3] } }\n"),
            "m.pbtxt:1:22: input: feature \"x\": image_shape is for an image feature (decode "
            "png, jpeg or image)");
  EXPECT_EQ(error("input { format: tfds feature { name: \"x\" decode: \"jpeg\" "
                  "image_shape: [2, 2, 3] resize: \"cubic\" } }\n"),
            "m.pbtxt:1:22: input: feature \"x\": resize \"cubic\" is not one of bilinear, "
            "nearest, area");
}

TEST(ModelConfigTest, AnInputBlockReadsCsvOrTsvColumns) {
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile csv,
      ParseDense("input { format: \"csv\" train_files: \"a.csv\" test_files: \"b.csv\"\n"
                 "  field_delim: \";\" column: \"y\" column: \"p0\" column: \"p1\"\n"
                 "  feature { name: \"pixels\" column: \"p0\" length: 2 } label: \"y\" }\n"));
  const data::InputSpec& in = csv.job.input;
  EXPECT_EQ(in.format, data::InputFormat::kCsv);
  EXPECT_EQ(in.csv.dialect.delimiter, ';');
  EXPECT_TRUE(in.csv.dialect.quoting);
  EXPECT_FALSE(in.csv.header);  // the columns are listed
  EXPECT_EQ(in.csv.columns, (std::vector<std::string>{"y", "p0", "p1"}));
  EXPECT_EQ(in.features.features[0].column, "p0");
  EXPECT_EQ(csv.job.model.input_dim, 2);

  const std::string files = "train_files: \"a\" test_files: \"b\" feature { name: \"x\" }";
  ASSERT_OK_AND_ASSIGN(ModelConfigFile tsv,
                       ParseDense("input { format: \"tsv\" " + files + " }\n"));
  EXPECT_EQ(tsv.job.input.csv.dialect.delimiter, '\t');
  EXPECT_FALSE(tsv.job.input.csv.dialect.quoting);
  EXPECT_TRUE(tsv.job.input.csv.header);
  EXPECT_EQ(ErrorOf("input { format: \"csv\" field_delim: \";;\" " + files + " }\n"),
            "m.pbtxt:1:23: input: field_delim \";;\" must be one character, not a quote or a line "
            "end");
  EXPECT_EQ(ErrorOf("input { format: \"csv\" header: false " + files + " }\n"),
            "m.pbtxt:1:23: input: header: false but no column names are given: list them with "
            "column: \"NAME\"");
  EXPECT_EQ(ErrorOf("input { format: \"tfrecord\" field_delim: \",\" " + files + " }\n"),
            "m.pbtxt:1:1: input: field_delim, header and column are for format \"csv\" or \"tsv\"");
  EXPECT_EQ(ErrorOf("input { format: \"tfrecord\" train_files: \"a\" test_files: \"b\" "
                    "feature { name: \"x\" column: \"c\" } }\n"),
            "m.pbtxt:1:61: input: feature \"x\": column is for CSV or TSV input");

  // Images stored as bytes in TFRecord files.
  ASSERT_OK_AND_ASSIGN(
      ModelConfigFile png,
      ParseDense("input { format: \"tfrecord\" train_files: \"a\" test_files: \"b\"\n"
                 "  feature { name: \"image\" decode: \"png\" length: 784 scale: 0.5 } }\n"));
  EXPECT_EQ(png.job.input.features.features[0].decode, data::FeatureDecode::kPng);
  EXPECT_EQ(png.job.model.input_dim, 784);
  EXPECT_EQ(ErrorOf("input { format: \"tfrecord\" train_files: \"a\" test_files: \"b\" "
                    "feature { name: \"x\" decode: \"gif\" } }\n"),
            "m.pbtxt:1:61: input: feature \"x\": decode \"gif\" is not one of raw_uint8, "
            "raw_float32, png, jpeg, image");
  EXPECT_EQ(ErrorOf("input { format: \"csv\" " +
                    std::string("train_files: \"a\" test_files: "
                                "\"b\" feature { name: \"x\" decode: \"png\" } }\n")),
            "m.pbtxt:1:56: input: feature \"x\": decode is for TFRecord input (a CSV cell is a "
            "value)");
}

}  // namespace
}  // namespace pstrain::model
