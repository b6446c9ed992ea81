#include "model/applications.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain::model {
namespace {

// Appends layers one after another, each reading the one before unless
// told otherwise; `last` is the name of the newest.
class Builder {
 public:
  Builder(v1::ModelConfig* config, float bn_momentum_override)
      : config_(config), bn_momentum_(bn_momentum_override) {}

  const std::string& last() const { return last_; }

  v1::LayerConfig* Add(const std::string& name) {
    v1::LayerConfig* l = config_->add_layer();
    l->set_name(name);
    last_ = name;
    return l;
  }
  v1::LayerConfig* Conv(const std::string& name, int64_t filters, int64_t kernel, int64_t stride,
                        bool same, bool bias) {
    v1::LayerConfig* l = Add(name);
    v1::ConvLayer* c = l->mutable_conv2d();
    c->set_filters(filters);
    c->add_kernel_size(kernel);
    if (stride != 1) c->add_strides(stride);
    if (same) c->set_padding(v1::same);
    if (!bias) c->set_use_bias(false);
    return l;
  }
  void Depthwise(const std::string& name, int64_t stride, bool same) {
    v1::DepthwiseConvLayer* c = Add(name)->mutable_depthwise_conv2d();
    c->add_kernel_size(3);
    if (stride != 1) c->add_strides(stride);
    if (same) c->set_padding(v1::same);
    c->set_use_bias(false);
  }
  void BatchNorm(const std::string& name, float epsilon, float momentum) {
    v1::BatchNormalizationLayer* b = Add(name)->mutable_batch_normalization();
    b->set_epsilon(epsilon);
    b->set_momentum(bn_momentum_ >= 0 ? bn_momentum_ : momentum);
  }
  void Relu6(const std::string& name) { Add(name)->mutable_relu()->set_max_value(6); }
  void Relu(const std::string& name) {
    Add(name)->mutable_activation()->set_activation(v1::relu);
  }
  void Pad(const std::string& name, int64_t top, int64_t bottom, int64_t left, int64_t right) {
    v1::ZeroPadding2DLayer* p = Add(name)->mutable_zero_padding2d();
    for (int64_t v : {top, bottom, left, right}) p->add_padding(v);
  }
  void Sum(const std::string& name, std::string a, std::string b) {  // copies: Add moves last()
    v1::LayerConfig* l = Add(name);
    l->mutable_add();
    l->add_inputs(a);
    l->add_inputs(b);
  }
  void Top(int64_t classes, const std::string& pool_name) {
    Add(pool_name)->mutable_global_average_pool2d();
    v1::DenseLayer* d = Add("predictions")->mutable_dense();
    d->set_units(classes);
    d->set_activation(v1::softmax);
  }
 private:
  v1::ModelConfig* config_;
  const float bn_momentum_;
  std::string last_ = "input";
};

// Keras's _make_divisible: v rounded to the nearest multiple of 8, at least
// 8, and not below 90% of v.
int64_t MakeDivisible(double v, int64_t divisor = 8) {
  int64_t out = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor *
                                               divisor);
  if (out < 0.9 * v) out += divisor;
  return out;
}

void MobileNetV2(Builder& b, int64_t h, int64_t w, double alpha, int64_t classes) {
  constexpr float kEps = 1e-3f, kMomentum = 0.999f;
  const int64_t first = MakeDivisible(32 * alpha);
  b.Conv("Conv1", first, 3, 2, /*same=*/true, /*bias=*/false);
  b.BatchNorm("bn_Conv1", kEps, kMomentum);
  b.Relu6("Conv1_relu");
  h = (h + 1) / 2;
  w = (w + 1) / 2;
  int64_t in = first;
  struct Block {
    int64_t filters, stride, expansion;
  };
  const Block blocks[] = {{16, 1, 1},  {24, 2, 6},  {24, 1, 6},  {32, 2, 6},  {32, 1, 6},
                          {32, 1, 6},  {64, 2, 6},  {64, 1, 6},  {64, 1, 6},  {64, 1, 6},
                          {96, 1, 6},  {96, 1, 6},  {96, 1, 6},  {160, 2, 6}, {160, 1, 6},
                          {160, 1, 6}, {320, 1, 6}};
  for (int id = 0; id < 17; ++id) {
    const Block& k = blocks[id];
    const std::string block_in = b.last();
    const int64_t out = MakeDivisible(static_cast<int64_t>(k.filters * alpha));
    const std::string prefix = id == 0 ? "expanded_conv_" : absl::StrCat("block_", id, "_");
    if (id > 0) {
      b.Conv(prefix + "expand", k.expansion * in, 1, 1, true, false);
      b.BatchNorm(prefix + "expand_BN", kEps, kMomentum);
      b.Relu6(prefix + "expand_relu");
    }
    if (k.stride == 2) {
      // Keras's correct_pad for a 3x3 kernel: one after, and one before
      // too where the side is odd.
      b.Pad(prefix + "pad", h % 2, 1, w % 2, 1);
      h = (h + 2 - h % 2 - 3) / 2 + 1;
      w = (w + 2 - w % 2 - 3) / 2 + 1;
    }
    b.Depthwise(prefix + "depthwise", k.stride, k.stride == 1);
    b.BatchNorm(prefix + "depthwise_BN", kEps, kMomentum);
    b.Relu6(prefix + "depthwise_relu");
    b.Conv(prefix + "project", out, 1, 1, true, false);
    b.BatchNorm(prefix + "project_BN", kEps, kMomentum);
    if (in == out && k.stride == 1) b.Sum(prefix + "add", block_in, b.last());
    in = out;
  }
  const int64_t last = alpha > 1.0 ? MakeDivisible(1280 * alpha) : 1280;
  b.Conv("Conv_1", last, 1, 1, false, false);
  b.BatchNorm("Conv_1_bn", kEps, kMomentum);
  b.Relu6("out_relu");
  b.Top(classes, "global_average_pooling2d");
}

void ResNet50(Builder& b, int64_t classes) {
  constexpr float kEps = 1.001e-5f, kMomentum = 0.99f;
  b.Pad("conv1_pad", 3, 3, 3, 3);
  b.Conv("conv1_conv", 64, 7, 2, false, true);
  b.BatchNorm("conv1_bn", kEps, kMomentum);
  b.Relu("conv1_relu");
  b.Pad("pool1_pad", 1, 1, 1, 1);
  v1::PoolLayer* pool = b.Add("pool1_pool")->mutable_max_pool2d();
  pool->add_pool_size(3);
  pool->add_strides(2);
  struct Stack {
    const char* name;
    int64_t filters, blocks, stride;
  };
  for (const Stack& s : {Stack{"conv2", 64, 3, 1}, Stack{"conv3", 128, 4, 2},
                         Stack{"conv4", 256, 6, 2}, Stack{"conv5", 512, 3, 2}}) {
    for (int64_t i = 1; i <= s.blocks; ++i) {
      const std::string name = absl::StrCat(s.name, "_block", i);
      const std::string block_in = b.last();
      const int64_t stride = i == 1 ? s.stride : 1;
      std::string shortcut = block_in;
      if (i == 1) {
        b.Conv(name + "_0_conv", 4 * s.filters, 1, stride, false, true);
        b.BatchNorm(name + "_0_bn", kEps, kMomentum);
        shortcut = b.last();
      }
      // The main path reads the block's input, beside the projection.
      v1::LayerConfig* first = b.Conv(name + "_1_conv", s.filters, 1, stride, false, true);
      if (i == 1) first->add_inputs(block_in);
      b.BatchNorm(name + "_1_bn", kEps, kMomentum);
      b.Relu(name + "_1_relu");
      b.Conv(name + "_2_conv", s.filters, 3, 1, true, true);
      b.BatchNorm(name + "_2_bn", kEps, kMomentum);
      b.Relu(name + "_2_relu");
      b.Conv(name + "_3_conv", 4 * s.filters, 1, 1, false, true);
      b.BatchNorm(name + "_3_bn", kEps, kMomentum);
      b.Sum(name + "_add", shortcut, b.last());
      b.Relu(name + "_out");
    }
  }
  b.Top(classes, "avg_pool");
}

}  // namespace

std::string ApplicationNames() { return "mobilenet_v2, resnet50"; }

absl::Status ExpandApplication(v1::ModelConfig* config) {
  if (!config->has_application()) return absl::OkStatus();
  const v1::ApplicationConfig& app = config->application();
  auto bad = [](const std::string& field, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("application.", field, " ", what));
  };
  if (config->layer_size() > 0) {
    return absl::InvalidArgumentError(
        "application: a config names an application or lists its layers, not both");
  }
  if (app.name() != "mobilenet_v2" && app.name() != "resnet50") {
    return bad("name", absl::StrCat("\"", app.name(), "\" is not one of ", ApplicationNames()));
  }
  const double alpha = app.has_alpha() ? app.alpha() : 1.0;
  if (!(alpha > 0 && alpha <= 4)) return bad("alpha", absl::StrCat(alpha, " is not in (0, 4]"));
  if (app.has_alpha() && app.name() != "mobilenet_v2") {
    return bad("alpha", "is MobileNetV2's width multiplier; resnet50 has none");
  }
  const int64_t classes = app.has_classes() ? app.classes() : 1000;
  if (classes < 2 || classes > 65536) {
    return bad("classes", absl::StrCat(classes, " is not in 2..65536"));
  }
  float bn_momentum = -1;
  if (app.has_bn_momentum()) {
    if (!(app.bn_momentum() >= 0 && app.bn_momentum() <= 1)) {
      return bad("bn_momentum", absl::StrCat(app.bn_momentum(), " is not in [0, 1]"));
    }
    bn_momentum = app.bn_momentum();
  }
  auto text = [](const auto& shape) {
    std::string out;
    for (int64_t d : shape) absl::StrAppend(&out, out.empty() ? "[" : ", ", d);
    return out + "]";
  };
  std::vector<int64_t> want(app.input_shape().begin(), app.input_shape().end());
  if (want.empty()) want.assign(config->input_shape().begin(), config->input_shape().end());
  if (want.empty()) want.assign(std::begin(kApplicationInput), std::end(kApplicationInput));
  if (want.size() != 3 || want[0] < 32 || want[1] < 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("application ", app.name(), " takes an input_shape [height, width, "
                     "channels] of at least 32x32, not ", text(want)));
  }
  if (config->input_shape_size() == 0) {
    for (int64_t d : want) config->add_input_shape(d);
  }
  const std::vector<int64_t> data(config->input_shape().begin(), config->input_shape().end());
  Builder b(config, bn_momentum);
  if (data != want) {
    if (data.size() != 3 || data[0] > want[0] || data[1] > want[1] ||
        (data[2] != want[2] && data[2] != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the input ", text(data), " does not fit application ", app.name(), "'s ",
          text(want), ": it is padded to a larger size and a single channel repeated, no more"));
    }
    if (data[0] < want[0] || data[1] < want[1]) {
      const int64_t top = (want[0] - data[0]) / 2, left = (want[1] - data[1]) / 2;
      b.Pad("input_pad", top, want[0] - data[0] - top, left, want[1] - data[1] - left);
    }
    if (data[2] != want[2]) {
      const std::string from = b.last();
      v1::LayerConfig* l = b.Add("input_channels");
      l->mutable_concatenate();
      for (int64_t c = 0; c < want[2]; ++c) l->add_inputs(from);
    }
  }
  if (app.name() == "mobilenet_v2") {
    MobileNetV2(b, want[0], want[1], alpha, classes);
  } else {
    ResNet50(b, classes);
  }
  config->clear_application();
  return absl::OkStatus();
}

}  // namespace pstrain::model
