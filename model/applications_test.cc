#include "model/applications.h"

#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "data/png_image.h"
#include "data/testing/tfrecord_files.h"
#include "gtest/gtest.h"
#include "model/model_config.h"
#include "model/network.h"
#include "proto/example.pb.h"

namespace pstrain::model {
namespace {

struct Counts {
  int64_t total = 0, trainable = 0;
};

Counts CountsOf(const std::string& text, const DataSizes& sizes = {}) {
  auto file = ParseModelConfigFile(text, "app.pbtxt", sizes);
  EXPECT_OK(file);
  if (!file.ok()) return {};
  auto net = Network::Create(file->job.model, 1);
  EXPECT_OK(net);
  if (!net.ok()) return {};
  Counts c;
  for (const VariableDef& v : (*net)->variables()) {
    c.total += v.elements();
    if (v.trainable()) c.trainable += v.elements();
  }
  return c;
}

// Keras's counts of its applications, total and trainable (model.summary()).
TEST(ApplicationsTest, KerassApplicationsHaveKerassParameterCounts) {
  Counts mobilenet = CountsOf(R"pb(application { name: "mobilenet_v2" })pb");
  EXPECT_EQ(mobilenet.total, 3538984);
  EXPECT_EQ(mobilenet.trainable, 3504872);
  // torchvision's mobilenet_v2(width_mult=0.35, num_classes=10): 408,938.
  DataSizes small;
  small.input_shape = {32, 32, 3};
  small.alpha = 0.35;
  small.classes = 10;
  small.replace_classes = true;
  Counts tiny = CountsOf(R"pb(application { name: "mobilenet_v2" })pb", small);
  EXPECT_EQ(tiny.total, 423018);
  EXPECT_EQ(tiny.trainable, 408938);
  Counts resnet = CountsOf(R"pb(application { name: "resnet50" })pb");
  EXPECT_EQ(resnet.total, 25636712);
  EXPECT_EQ(resnet.trainable, 25583592);
}

// Keras's layer names and shapes where the architecture turns: the padded
// stride-2 depthwise blocks, the residual adds, the projection shortcut.
TEST(ApplicationsTest, LayersAreNamedAndShapedAsKerasBuildsThem) {
  ASSERT_OK_AND_ASSIGN(ModelConfigFile m, ParseModelConfigFile(R"pb(
    application { name: "mobilenet_v2" }
  )pb", "m.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(m.job.model, 1));
  auto shape_of = [&](const Network& n, const std::string& name) {
    const std::vector<LayerSpec>& layers = n.spec().layers;
    for (size_t l = 0; l < layers.size(); ++l) {
      if (layers[l].name == name) return n.shapes()[l + 1];
    }
    return Shape{};
  };
  EXPECT_EQ(shape_of(*net, "block_1_pad"), (Shape{113, 113, 96}));
  EXPECT_EQ(shape_of(*net, "block_1_depthwise"), (Shape{56, 56, 96}));
  EXPECT_EQ(shape_of(*net, "block_2_add"), (Shape{56, 56, 24}));
  EXPECT_EQ(shape_of(*net, "block_16_project_BN"), (Shape{7, 7, 320}));
  EXPECT_EQ(shape_of(*net, "Conv_1"), (Shape{7, 7, 1280}));
  EXPECT_EQ(net->spec().layers.back().name, "predictions");
  EXPECT_EQ(net->spec().layers.back().activation, Activation::kSoftmax);
  ASSERT_OK_AND_ASSIGN(ModelConfigFile r, ParseModelConfigFile(R"pb(
    application { name: "resnet50" }
  )pb", "r.pbtxt"));
  ASSERT_OK_AND_ASSIGN(auto resnet, Network::Create(r.job.model, 1));
  EXPECT_EQ(shape_of(*resnet, "pool1_pool"), (Shape{56, 56, 64}));
  EXPECT_EQ(shape_of(*resnet, "conv3_block1_0_bn"), (Shape{28, 28, 512}));
  EXPECT_EQ(shape_of(*resnet, "conv5_block3_out"), (Shape{7, 7, 2048}));
  const std::vector<LayerSpec>& layers = resnet->spec().layers;
  for (const LayerSpec& l : layers) {
    if (l.name == "conv3_block1_1_conv") EXPECT_EQ(l.inputs, (std::vector<std::string>{"conv2_block3_out"}));
    if (l.name == "conv3_block1_add") {
      EXPECT_EQ(l.inputs, (std::vector<std::string>{"conv3_block1_0_bn", "conv3_block1_3_bn"}));
    }
    if (l.kind == LayerKind::kBatchNormalization) EXPECT_FLOAT_EQ(l.epsilon, 1.001e-5f);
  }
}

// Fashion-MNIST's [28, 28, 1] fitted to the application's [32, 32, 3] by
// layers in front; --bn_momentum sets every batch normalization's.
TEST(ApplicationsTest, TheDataIsFittedToTheApplicationsInputByLayersInFront) {
  DataSizes sizes;
  sizes.bn_momentum = 0.9;
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, ParseModelConfigFile(R"pb(
    input_shape: [28, 28, 1]
    application { name: "mobilenet_v2" input_shape: [32, 32, 3] alpha: 0.35 classes: 10 }
  )pb", "f.pbtxt", sizes));
  const std::vector<LayerSpec>& layers = f.job.model.layers;
  EXPECT_EQ(f.job.model.input_dim, 784);
  ASSERT_GE(layers.size(), 3u);
  EXPECT_EQ(layers[0].name, "input_pad");
  EXPECT_EQ(layers[0].padding, (std::array<int, 4>{2, 2, 2, 2}));
  EXPECT_EQ(layers[1].name, "input_channels");
  EXPECT_EQ(layers[1].inputs, (std::vector<std::string>{"input_pad", "input_pad", "input_pad"}));
  for (const LayerSpec& l : layers) {
    if (l.kind == LayerKind::kBatchNormalization) EXPECT_FLOAT_EQ(l.momentum, 0.9f) << l.name;
  }
  Counts c = CountsOf(R"pb(
    input_shape: [28, 28, 1]
    application { name: "mobilenet_v2" input_shape: [32, 32, 3] alpha: 0.35 classes: 10 }
  )pb");
  EXPECT_EQ(c.total, 423018);
}

// The job's data says its own shape (the IDX images' header): a config
// naming an application without an input_shape takes it, and the
// application's input (--input_shape, else 224x224x3) is fitted to it.
TEST(ApplicationsTest, AnApplicationTakesTheShapeOfTheImagesTheJobReads) {
  EXPECT_EQ(IdxImageShapeOf("/usr/share/datasets/fashion-mnist"),
            (std::vector<int64_t>{28, 28, 1}));
  EXPECT_TRUE(IdxImageShapeOf(::testing::TempDir()).empty());
  DataSizes sizes;
  sizes.data_shape = {28, 28, 1};
  sizes.input_shape = {32, 32, 3};
  sizes.alpha = 0.35;
  sizes.classes = 10;
  sizes.replace_classes = true;
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, ParseModelConfigFile(R"pb(
    application { name: "mobilenet_v2" }
  )pb", "m.pbtxt", sizes));
  EXPECT_EQ(f.job.model.input_dim, 784);
  EXPECT_EQ(f.job.model.layers[0].name, "input_pad");
  EXPECT_EQ(CountsOf(R"pb(application { name: "mobilenet_v2" })pb", sizes).total, 423018);
  sizes.input_shape.clear();  // Keras's 224x224x3
  sizes.alpha = -1;
  ASSERT_OK_AND_ASSIGN(f, ParseModelConfigFile(R"pb(application { name: "resnet50" })pb",
                                               "r.pbtxt", sizes));
  EXPECT_EQ(f.job.model.layers[0].padding, (std::array<int, 4>{98, 98, 98, 98}));
}

// TFRecord images say their shape too: the first training record's PNG
// (TensorFlow Datasets' way), or raw bytes with height, width and depth
// (`pstrain data to-tfrecord --image_encoding=raw`). Read under the job's
// data directory; without it the config must give input_shape.
TEST(ApplicationsTest, AnApplicationTakesTheShapeOfTheTfRecordImagesTheJobReads) {
  ASSERT_OK_AND_ASSIGN(const std::string png, testing::WriteExampleFiles("png", 1, 2, false, [](int i) {
    v1::Example e;
    auto& m = *e.mutable_features()->mutable_feature();
    const std::vector<uint8_t> pixels(28 * 28, static_cast<uint8_t>(i));
    m["image"].mutable_bytes_list()->add_value(*data::EncodePng(pixels.data(), 28, 28, 1));
    m["label"].mutable_int64_list()->add_value(i);
    return e.SerializeAsString();
  }));
  ASSERT_OK_AND_ASSIGN(const std::string raw, testing::WriteExampleFiles("raw", 1, 2, false, [](int i) {
    v1::Example e;
    auto& m = *e.mutable_features()->mutable_feature();
    m["image_raw"].mutable_bytes_list()->add_value(std::string(20 * 24 * 3, static_cast<char>(i)));
    m["height"].mutable_int64_list()->add_value(20);
    m["width"].mutable_int64_list()->add_value(24);
    m["depth"].mutable_int64_list()->add_value(3);
    m["label"].mutable_int64_list()->add_value(i);
    return e.SerializeAsString();
  }));
  DataSizes sizes;
  sizes.input_shape = {32, 32, 3};
  sizes.alpha = 0.35;
  sizes.classes = 10;
  sizes.replace_classes = true;
  const std::string png_config = R"pb(
    input {
      format: tfrecord
      train_files: "part-*"
      test_files: "part-*"
      feature { name: "image" decode: "png" length: 784 scale: 0.00392156862745098 }
    }
    application { name: "mobilenet_v2" }
  )pb";
  sizes.data_dir = png;
  ASSERT_OK_AND_ASSIGN(ModelConfigFile f, ParseModelConfigFile(png_config, "m.pbtxt", sizes));
  EXPECT_EQ(f.job.model.input_dim, 784);
  EXPECT_EQ(f.job.model.layers[0].name, "input_pad");
  EXPECT_EQ(f.job.model.layers[1].name, "input_channels");
  EXPECT_EQ(CountsOf(png_config, sizes).total, 423018);
  sizes.data_dir = raw;
  ASSERT_OK_AND_ASSIGN(f, ParseModelConfigFile(R"pb(
    input {
      format: tfrecord
      train_files: "part-*"
      test_files: "part-*"
      feature { name: "image_raw" decode: "raw_uint8" length: 1440 }
    }
    application { name: "mobilenet_v2" }
  )pb", "r.pbtxt", sizes));
  EXPECT_EQ(f.job.model.input_dim, 1440);
  EXPECT_EQ(f.job.model.layers[0].name, "input_pad");
  EXPECT_EQ(f.job.model.layers[0].padding, (std::array<int, 4>{6, 6, 4, 4}));
  sizes.data_dir.clear();
  EXPECT_EQ(std::string(ParseModelConfigFile(png_config, "m.pbtxt", sizes).status().message()),
            "m.pbtxt:8:5: application mobilenet_v2 takes [32, 32, 3] (3072 values) but the "
            "input's features hold 784 and the config gives no input_shape: give the shape of "
            "the data's images, input_shape: [height, width, channels] (a TFRecord image says "
            "its own when it is the one feature, decoded as png or raw_uint8, and its training "
            "files are found under --data_dir)");
}

TEST(ApplicationsTest, BadApplicationsAreNamed) {
  auto message = [](const std::string& text) {
    return std::string(ParseModelConfigFile(text, "a.pbtxt").status().message());
  };
  EXPECT_EQ(message(R"pb(application { name: "vgg16" })pb"),
            "a.pbtxt:1:1: application.name \"vgg16\" is not one of mobilenet_v2, resnet50");
  EXPECT_EQ(message(R"pb(application { name: "resnet50" alpha: 0.5 })pb"),
            "a.pbtxt:1:1: application.alpha is MobileNetV2's width multiplier; resnet50 has none");
  EXPECT_EQ(message("input_shape: [16, 16, 3]\napplication { name: \"mobilenet_v2\" }"),
            "a.pbtxt:2:1: application mobilenet_v2 takes an input_shape [height, width, "
            "channels] of at least 32x32, not [16, 16, 3]");
  EXPECT_EQ(message("input_shape: [40, 40, 2]\napplication { name: \"mobilenet_v2\" "
                    "input_shape: [32, 32, 3] }"),
            "a.pbtxt:2:1: the input [40, 40, 2] does not fit application mobilenet_v2's [32, "
            "32, 3]: it is padded to a larger size and a single channel repeated, no more");
  EXPECT_EQ(message("application { name: \"resnet50\" }\nlayer { dense { units: 2 } }"),
            "a.pbtxt:1:1: application: a config names an application or lists its layers, not "
            "both");
}

}  // namespace
}  // namespace pstrain::model
