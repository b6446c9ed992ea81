#include "model/network.h"

#include <cmath>
#include <random>

#include "base/testing/status_testing.h"
#include "data/dataset.h"
#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

// Gradient checks of every layer, and batch and label errors, run for each
// backend in backend_test.cc.

TEST(NetworkTest, VariablesAndLayout) {
  ASSERT_OK_AND_ASSIGN(auto mlp, Network::Create(NetworkSpec::FromWidths(784, {128}, 10), 32));
  ASSERT_EQ(mlp->variables().size(), 4u);
  EXPECT_EQ(mlp->variables()[0].name, "dense_0/kernel");
  EXPECT_EQ(mlp->variables()[0].shape, (std::vector<int64_t>{784, 128}));
  EXPECT_EQ(mlp->variables()[3].name, "dense_1/bias");
  EXPECT_EQ(mlp->offsets()[2], 784 * 128 + 128);
  EXPECT_EQ(mlp->num_parameters(), 784 * 128 + 128 + 128 * 10 + 10);
  // The layout says which variables each layer has and where they are.
  const ParamLayout& layout = mlp->layout();
  EXPECT_EQ(layout.num_layers(), 2);
  EXPECT_EQ(layout.LayerVariables(1), (std::vector<int>{2, 3}));
  EXPECT_EQ(layout.OffsetOf(1, ParamRole::kKernel), 784 * 128 + 128);
  EXPECT_EQ(layout.OffsetOf(1, ParamRole::kBias), 784 * 128 + 128 + 128 * 10);
  EXPECT_EQ(layout.FirstTable(), -1);
  EXPECT_EQ(mlp->InitialParameters(5), mlp->InitialParameters(5));
  EXPECT_NE(mlp->InitialParameters(5), mlp->InitialParameters(6));
}

TEST(NetworkTest, SgdOnASeparableProblemReachesFullAccuracy) {
  ASSERT_OK_AND_ASSIGN(auto mlp, Network::Create(NetworkSpec::FromWidths(2, {8}, 2), 16));
  std::vector<float> params = mlp->InitialParameters(1), grads(mlp->num_parameters());
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(16 * 2);
  std::vector<int32_t> y(16);
  for (int step = 0; step < 400; ++step) {
    for (int i = 0; i < 16; ++i) {
      x[2 * i] = u(rng);
      x[2 * i + 1] = u(rng);
      y[i] = x[2 * i] + x[2 * i + 1] > 0 ? 1 : 0;
    }
    ASSERT_OK(mlp->ComputeGradients(params.data(), x.data(), y.data(), 16, grads.data()));
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.5f * grads[i];
  }
  ASSERT_OK_AND_ASSIGN(BatchResult r, mlp->Evaluate(params.data(), x.data(), y.data(), 16));
  EXPECT_GE(r.correct, 15);
}

// A split held as bytes (data::Dataset::pixels) scores as the floats it
// stands for, chunk by chunk, with the features each chunk widens.
TEST(NetworkTest, EvaluateExamplesScoresBytesAsTheirFloats) {
  ASSERT_OK_AND_ASSIGN(auto mlp, Network::Create(NetworkSpec::FromWidths(5, {6}, 3), 8));
  const std::vector<float> params = mlp->InitialParameters(3);
  data::Dataset bytes, floats;
  bytes.num_examples = floats.num_examples = 7;
  bytes.example_dim = floats.example_dim = 5;
  std::mt19937 rng(4);
  for (int i = 0; i < 7 * 5; ++i) {
    bytes.pixels.push_back(static_cast<uint8_t>(rng() % 256));
    floats.features.push_back(bytes.pixels.back() * data::kPixelScale);
  }
  for (int i = 0; i < 7; ++i) bytes.labels.push_back(static_cast<int32_t>(rng() % 3));
  floats.labels = bytes.labels;
  auto score = [&](const data::Dataset& examples, std::vector<std::vector<float>>* inputs) {
    return EvaluateExamples(mlp->embeddings(), nullptr, examples, 3,
                            [&](const float* in, const int32_t* labels, int n) {
                              inputs->emplace_back(in, in + 5 * n);
                              return mlp->Evaluate(params.data(), in, labels, n);
                            });
  };
  std::vector<std::vector<float>> from_bytes, from_floats;
  ASSERT_OK_AND_ASSIGN(BatchResult b, score(bytes, &from_bytes));
  ASSERT_OK_AND_ASSIGN(BatchResult f, score(floats, &from_floats));
  // Chunks of 3, 3 and 1 examples, the same bits either way.
  ASSERT_EQ(from_bytes.size(), 3u);
  EXPECT_EQ(from_bytes[2].size(), 5u);
  EXPECT_EQ(from_bytes, from_floats);
  EXPECT_EQ(b.count, 7);
  EXPECT_EQ(b.loss_sum, f.loss_sum);
  EXPECT_EQ(b.correct, f.correct);
  ASSERT_OK_AND_ASSIGN(BatchResult whole, mlp->Evaluate(params.data(), floats.features.data(),
                                                        floats.labels.data(), 7));
  EXPECT_NEAR(b.loss_sum, whole.loss_sum, 1e-5);
  EXPECT_EQ(b.correct, whole.correct);
  // No examples: nothing scored.
  data::Dataset none;
  none.example_dim = 5;
  std::vector<std::vector<float>> from_none;
  ASSERT_OK_AND_ASSIGN(BatchResult empty, score(none, &from_none));
  EXPECT_EQ(empty.count, 0);
  EXPECT_TRUE(from_none.empty());
}

TEST(NetworkTest, RejectsBadLayersNamingThem) {
  auto message = [](const NetworkSpec& spec) {
    return std::string(Network::Create(spec, 4).status().message());
  };
  NetworkSpec spec = NetworkSpec::FromWidths(3, {4}, 2);
  spec.layers[1].relu = true;
  EXPECT_EQ(message(spec),
            "model layer 1 (dense_1): the last layer gives the logits of softmax cross-entropy: "
            "no activation (or softmax, which the loss applies)");
  spec = NetworkSpec::FromWidths(3, {4}, 2);
  spec.layers[1].activation = Activation::kTanh;
  EXPECT_EQ(message(spec),
            "model layer 1 (dense_1): the last layer gives the logits of softmax cross-entropy: "
            "no activation (or softmax, which the loss applies)");
  spec = NetworkSpec::FromWidths(3, {4}, 2);
  spec.layers[0].relu = false;
  spec.layers[0].activation = Activation::kSoftmax;
  EXPECT_EQ(message(spec),
            "model layer 0 (dense_0): activation softmax is the last dense layer's only (the loss "
            "takes its logits)");
  spec = NetworkSpec::FromWidths(3, {4}, 1);
  EXPECT_EQ(message(spec),
            "model layer 1 (dense_1): the last layer needs one unit per class, at least 2");
  spec = NetworkSpec::FromWidths(3, {4}, 2);
  spec.layers[1].name = "dense_0";
  EXPECT_EQ(message(spec), "model layer 1 (dense_0): the name is used twice");
  spec = NetworkSpec::FromWidths(3, {4}, 2);
  spec.layers[0].kernel_initializer = "he_normal";
  EXPECT_EQ(message(spec),
            "model layer 0 (dense_0): kernel initializer \"he_normal\" is not glorot_uniform, "
            "zeros, ones or uniform:A (A >= 0)");
  EXPECT_EQ(message(NetworkSpec{3, {}}), "model has no layers");
  EXPECT_EQ(message(NetworkSpec::FromWidths(2, {0}, 3)),
            "model layer 0 (dense_0): dense has 0 units");
}

TEST(NetworkTest, LayerWithoutReluIsLinearAndInitializersApply) {
  // Two linear layers compose into one linear map, so the gradient check
  // above covers it; here: no ReLU means negative pre-activations pass.
  NetworkSpec spec = NetworkSpec::FromWidths(2, {3}, 2);
  spec.layers[0].relu = false;
  spec.layers[0].kernel_initializer = "zeros";
  spec.layers[0].bias_initializer = "uniform:0.5";
  ASSERT_OK_AND_ASSIGN(auto mlp, Network::Create(spec, 2));
  std::vector<float> p = mlp->InitialParameters(4);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], 0.0f);  // dense_0/kernel
  bool any_nonzero = false;
  for (int i = 6; i < 9; ++i) {
    EXPECT_LE(std::fabs(p[i]), 0.5f);
    any_nonzero |= p[i] != 0.0f;
  }
  EXPECT_TRUE(any_nonzero);
  for (int i = 6; i < 9; ++i) p[i] = -1.0f;  // negative hidden outputs
  for (int i = 9; i < 15; ++i) p[i] = 1.0f;  // dense_1/kernel all ones
  p[15] = 0.0f;
  p[16] = 0.0f;
  std::vector<float> x = {0.0f, 0.0f};
  std::vector<int32_t> y = {0};
  std::vector<float> g(mlp->num_parameters());
  ASSERT_OK(mlp->ComputeGradients(p.data(), x.data(), y.data(), 1, g.data()));
  // Logits are equal (-3, -3): p = 0.5 each; dL/dlogit0 = -0.5; every hidden
  // unit feeds both logits with weight 1, so dL/dh = -0.5 + 0.5 = 0, but the
  // kernel gradient of dense_1 is h * delta = -1 * -0.5 = 0.5: non-zero only
  // because the negative hidden values were not clipped to 0.
  EXPECT_NEAR(g[9], 0.5f, 1e-6);
  EXPECT_NEAR(g[10], -0.5f, 1e-6);
}

LayerSpec Layer(LayerKind kind, const std::string& name) {
  LayerSpec l;
  l.kind = kind;
  l.name = name;
  return l;
}

// TensorFlow's Fashion-MNIST CNN: Conv2D(32, 3x3, relu) -> MaxPool2D(2) ->
// Flatten -> Dense(128, relu) -> Dense(10), with `dropout` before the last.
NetworkSpec FashionCnn(float dropout = 0) {
  NetworkSpec spec;
  spec.input_dim = 784;
  spec.input_shape = {28, 28, 1};
  LayerSpec conv = Layer(LayerKind::kConv2D, "conv2d_0");
  conv.units = 32;
  conv.window = {3, 3};
  conv.relu = true;
  LayerSpec pool = Layer(LayerKind::kMaxPool2D, "max_pool2d_0");
  pool.window = pool.stride = {2, 2};
  LayerSpec hidden = Layer(LayerKind::kDense, "dense_0");
  hidden.units = 128;
  hidden.relu = true;
  LayerSpec logits = Layer(LayerKind::kDense, "dense_1");
  logits.units = 10;
  spec.layers = {conv, pool, Layer(LayerKind::kFlatten, "flatten_0"), hidden};
  if (dropout > 0) {
    LayerSpec drop = Layer(LayerKind::kDropout, "dropout_0");
    drop.rate = dropout;
    spec.layers.push_back(drop);
  }
  spec.layers.push_back(logits);
  return spec;
}

// The summed loss of a batch at `params` (forward only, no dropout).
// The training loss (a batch normalization on the batch's statistics).
double LossAt(Network* net, const std::vector<float>& params, const std::vector<float>& x,
              const std::vector<int32_t>& y) {
  std::vector<float> grads(params.size());
  return net
      ->ComputeGradients(params.data(), x.data(), y.data(), static_cast<int>(y.size()),
                         grads.data())
      ->loss_sum;
}

// Each variable's gradient (and the input's) against central differences
// of the loss along a direction in it.
void CheckStackGradients(const NetworkSpec& spec, int batch, uint64_t seed) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(spec, batch));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> params = net->InitialParameters(seed);
  std::vector<float> x(static_cast<size_t>(batch) * net->input_width());
  for (float& v : x) v = u(rng);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(rng() % spec.num_classes());
  std::vector<float> grads(params.size()), input_grad(x.size());
  ASSERT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), batch, grads.data(), nullptr,
                                  input_grad.data())
                .status());
  auto check = [&](std::vector<float>* values, const std::vector<float>& analytic, int64_t begin,
                   int64_t end, const std::string& what) {
    // Along the gradient plus a random direction of the same length: the
    // gradient's part keeps the change in loss well above float rounding,
    // the random part catches a gradient off in direction.
    std::vector<float> dir(end - begin);
    double gnorm = 0, rnorm = 0;
    for (int64_t i = begin; i < end; ++i) gnorm += double{analytic[i]} * analytic[i];
    for (float& d : dir) {
      d = u(rng) - 0.5f;
      rnorm += d * d;
    }
    gnorm = std::sqrt(std::max(gnorm, 1e-30));
    rnorm = std::sqrt(rnorm);
    double expected = 0;
    for (int64_t i = begin; i < end; ++i) {
      float& d = dir[i - begin];
      d = static_cast<float>(d / rnorm + analytic[i] / gnorm);
      expected += static_cast<double>(analytic[i]) * d * batch;  // mean -> sum
    }
    // Small enough that few ReLUs and pooling maxima change sides.
    const float eps = 1e-3f;
    const std::vector<float> keep = *values;
    for (int64_t i = begin; i < end; ++i) (*values)[i] = keep[i] + eps * dir[i - begin];
    const double up =
        values == &params ? LossAt(net.get(), params, x, y) : LossAt(net.get(), params, *values, y);
    for (int64_t i = begin; i < end; ++i) (*values)[i] = keep[i] - eps * dir[i - begin];
    const double down =
        values == &params ? LossAt(net.get(), params, x, y) : LossAt(net.get(), params, *values, y);
    *values = keep;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(expected, numeric, 1e-2 * std::max(std::abs(numeric), 1e-2)) << what;
  };
  for (size_t v = 0; v < net->variables().size(); ++v) {
    // Moving statistics hold increments, not gradients (model/batch_norm.h).
    if (!net->layout().in_flat(v) || !net->variables()[v].trainable()) continue;
    const int64_t begin = net->offsets()[v];
    const int64_t end = begin + ShapeSize(net->variables()[v].shape);
    check(&params, grads, begin, end, net->variables()[v].name);
  }
  check(&x, input_grad, 0, static_cast<int64_t>(x.size()), "input");
}

TEST(NetworkTest, FashionCnnHasKerasShapesAndCounts) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(FashionCnn(), 32));
  EXPECT_EQ(net->shapes(),
            (std::vector<Shape>{{28, 28, 1}, {26, 26, 32}, {13, 13, 32}, {5408}, {128}, {10}}));
  ASSERT_EQ(net->variables().size(), 6u);
  EXPECT_EQ(net->variables()[0].name, "conv2d_0/kernel");
  EXPECT_EQ(net->variables()[0].shape, (std::vector<int64_t>{3, 3, 1, 32}));
  EXPECT_EQ(net->variables()[2].shape, (std::vector<int64_t>{5408, 128}));
  // Keras's model.summary() for this model: 320 + 692,352 + 1,290.
  EXPECT_EQ(net->num_parameters(), 693962);
  EXPECT_EQ(net->layout().num_layers(), 3);
  // Backprop reports the layers with variables, last first.
  std::vector<float> params = net->InitialParameters(1), grads(params.size());
  std::vector<float> x(2 * 784, 0.5f);
  std::vector<int32_t> y = {3, 7};
  std::vector<int> done;
  ASSERT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), 2, grads.data(),
                                  [&done](int l) { done.push_back(l); })
                .status());
  EXPECT_EQ(done, (std::vector<int>{2, 1, 0}));
}

TEST(NetworkTest, FashionCnnGradientsMatchCentralDifferences) {
  CheckStackGradients(FashionCnn(), 3, 5);
}

// The seeds' text CNN after its embedding: [300, 7] -> Conv1D(64, 5) ->
// MaxPool1D(2) -> Conv1D(32, 3) -> MaxPool1D(2) -> Flatten -> Dense(46).
NetworkSpec TextCnn() {
  NetworkSpec spec;
  spec.input_dim = 0;
  spec.embeddings.resize(1);
  EmbeddingBagSpec& emb = spec.embeddings[0];
  emb.name = "embedding";
  emb.vocabulary = 30982;
  emb.dim = 7;
  emb.ids_from = "feature:tokens";
  emb.sequence = true;
  emb.ids_length = 300;
  LayerSpec conv0 = Layer(LayerKind::kConv1D, "conv1d_0");
  conv0.units = 64;
  conv0.window = {1, 5};
  conv0.relu = true;
  LayerSpec conv1 = conv0;
  conv1.name = "conv1d_1";
  conv1.units = 32;
  conv1.window = {1, 3};
  LayerSpec pool0 = Layer(LayerKind::kMaxPool1D, "max_pool1d_0");
  pool0.window = pool0.stride = {1, 2};
  LayerSpec pool1 = pool0;
  pool1.name = "max_pool1d_1";
  LayerSpec logits = Layer(LayerKind::kDense, "dense_0");
  logits.units = 46;
  spec.layers = {conv0, pool0, conv1, pool1, Layer(LayerKind::kFlatten, "flatten_0"), logits};
  return spec;
}

TEST(NetworkTest, TextCnnTakesTheEmbeddingsSequenceAndItsGradientsMatch) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(TextCnn(), 4));
  EXPECT_EQ(net->input_width(), 2100);
  EXPECT_EQ(net->shapes().back(), (Shape{46}));
  // Keras's counts: 2,304 + 6,176 + 107,502 in the flat array, the table
  // (216,874) on the PS by row.
  EXPECT_EQ(net->num_parameters(), 2304 + 6176 + 107502);
  EXPECT_EQ(net->variables().back().name, "embedding/embeddings");
  EXPECT_EQ(net->variables().back().shape, (std::vector<int64_t>{30982, 7}));
  // The gradient at the input is what the embedding's rows receive.
  CheckStackGradients(TextCnn(), 3, 9);
}

TEST(NetworkTest, SigmoidLossGradientsMatchAndTheAucCountsPairs) {
  NetworkSpec spec = NetworkSpec::FromWidths(5, {4}, 1);
  spec.loss = Loss::kSigmoidCrossEntropy;
  EXPECT_EQ(spec.num_classes(), 2);
  CheckStackGradients(spec, 6, 3);
  // More than one logit is refused.
  NetworkSpec two = NetworkSpec::FromWidths(5, {4}, 2);
  two.loss = Loss::kSigmoidCrossEntropy;
  EXPECT_EQ(Network::Create(two, 4).status().message(),
            "model layer 1 (dense_1): a sigmoid loss takes one logit, but the last layer has 2 "
            "units");
  // The loss by hand: one logit z = bias (kernel zero) for labels 1 and 0.
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(spec, 2));
  std::vector<float> params(net->num_parameters(), 0.0f);
  params.back() = 2.0f;  // the last bias: every logit is 2
  const std::vector<float> x(10, 0.5f);
  const std::vector<int32_t> y = {1, 0};
  ASSERT_OK_AND_ASSIGN(BatchResult r, net->Evaluate(params.data(), x.data(), y.data(), 2));
  EXPECT_NEAR(r.loss_sum, std::log1p(std::exp(-2.0)) + std::log1p(std::exp(2.0)), 1e-5);
  EXPECT_EQ(r.correct, 1);
  EXPECT_TRUE(r.has_auc());
  EXPECT_DOUBLE_EQ(r.Auc(), 0.5);  // one score for both: a tie
  // Pairs by hand: positives at 0.9 (two) and 0.5, negatives at 0.1 (two)
  // and 0.5: 6 + 2.5 of 9 pairs ordered right.
  BatchResult h;
  h.positives.assign(BatchResult::kAucBins, 0);
  h.negatives.assign(BatchResult::kAucBins, 0);
  h.positives[9000] = 2;
  h.positives[5000] = 1;
  h.negatives[1000] = 2;
  h.negatives[5000] = 1;
  EXPECT_NEAR(h.Auc(), 8.5 / 9, 1e-12);
  BatchResult sum;
  sum.Add(h);
  sum.Add(h);
  EXPECT_NEAR(sum.Auc(), 8.5 / 9, 1e-12);
  EXPECT_EQ(sum.positives[9000], 4);
  // The same pairs as a step scores them: each example's bin kept until
  // Add() folds it in; Auc() counts them either way.
  BatchResult step;
  for (const auto& [p, label] : std::vector<std::pair<float, int>>{
           {0.9f, 1}, {0.9f, 1}, {0.5f, 1}, {0.1f, 0}, {0.1f, 0}, {0.5f, 0}}) {
    step.AddScore(p, label);
  }
  EXPECT_TRUE(step.has_auc());
  EXPECT_TRUE(step.positives.empty());
  EXPECT_NEAR(step.Auc(), 8.5 / 9, 1e-12);
  sum.Add(step);
  EXPECT_EQ(sum.positives[9000], 6);
  EXPECT_EQ(sum.negatives[1000], 6);
  EXPECT_NEAR(sum.Auc(), 8.5 / 9, 1e-12);
  // Scores at the ends of [0, 1] land in the first and last bins.
  BatchResult ends;
  ends.AddScore(1.0f, 1);
  ends.AddScore(0.0f, 0);
  BatchResult folded;
  folded.Add(ends);
  EXPECT_EQ(folded.positives[BatchResult::kAucBins - 1], 1);
  EXPECT_EQ(folded.negatives[0], 1);
}

TEST(NetworkTest, DropoutRepeatsPerSeedAndIsOffInEvaluation) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(FashionCnn(0.5f), 4));
  ASSERT_OK_AND_ASSIGN(auto plain, Network::Create(FashionCnn(), 4));
  std::vector<float> params = net->InitialParameters(2);
  ASSERT_EQ(params, plain->InitialParameters(2));  // dropout has no variables
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(4 * 784);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> y = {0, 1, 2, 3};
  auto grads_at = [&](uint64_t seed) {
    std::vector<float> g(params.size());
    net->SetStepSeed(seed);
    EXPECT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), 4, g.data()).status());
    return g;
  };
  EXPECT_EQ(grads_at(7), grads_at(7));
  EXPECT_NE(grads_at(7), grads_at(8));
  // Evaluation runs without it: the same loss as the model without dropout.
  EXPECT_EQ(net->Evaluate(params.data(), x.data(), y.data(), 4)->loss_sum,
            plain->Evaluate(params.data(), x.data(), y.data(), 4)->loss_sum);
}


// A graph of dense layers small enough to differentiate by hand:
//   a = relu(x Wa + ba), b = x Wb + bb   (x read by three layers)
//   s = a + b, c = [s, x], logits = c Wo + bo
NetworkSpec DenseGraph() {
  NetworkSpec spec;
  spec.input_dim = 4;
  LayerSpec a = Layer(LayerKind::kDense, "a");
  a.units = 3;
  a.relu = true;
  a.inputs = {"input"};
  LayerSpec b = Layer(LayerKind::kDense, "b");
  b.units = 3;
  b.inputs = {"input"};
  LayerSpec sum = Layer(LayerKind::kAdd, "sum");
  sum.inputs = {"a", "b"};
  LayerSpec cat = Layer(LayerKind::kConcatenate, "cat");
  cat.inputs = {"sum", "input"};
  LayerSpec out = Layer(LayerKind::kDense, "logits");
  out.units = 2;
  spec.layers = {a, b, sum, cat, out};
  return spec;
}

TEST(NetworkTest, AGraphWithFanOutAddAndConcatenateMatchesAHandWrittenReference) {
  const int batch = 3;
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(DenseGraph(), batch));
  EXPECT_FALSE(net->sequential());
  EXPECT_EQ(net->shapes(), (std::vector<Shape>{{4}, {3}, {3}, {3}, {7}, {2}}));
  EXPECT_EQ(net->layer_inputs(3), (std::vector<int>{3, 0}));
  EXPECT_EQ(net->layer_inputs(4), (std::vector<int>{4}));  // the layer before
  ASSERT_EQ(net->num_parameters(), (4 * 3 + 3) * 2 + 7 * 2 + 2);
  std::vector<float> params = net->InitialParameters(7);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& p : params) p = u(rng);  // biases too, so every ReLU side shows
  std::vector<float> x(batch * 4);
  for (float& v : x) v = u(rng);
  const std::vector<int32_t> y = {1, 0, 1};
  std::vector<float> grads(params.size()), input_grad(x.size());
  std::vector<int> done;
  ASSERT_OK_AND_ASSIGN(BatchResult r,
                       net->ComputeGradients(params.data(), x.data(), y.data(), batch,
                                             grads.data(), [&](int l) { done.push_back(l); },
                                             input_grad.data()));
  EXPECT_EQ(done, (std::vector<int>{2, 1, 0}));
  // The reference, in doubles: offsets as the layout puts them.
  const float* wa = params.data();
  const float* ba = wa + 12;
  const float* wb = ba + 3;
  const float* bb = wb + 12;
  const float* wo = bb + 3;
  const float* bo = wo + 14;
  std::vector<double> g(params.size(), 0.0), gx(x.size(), 0.0);
  double loss = 0;
  for (int n = 0; n < batch; ++n) {
    const float* xn = x.data() + n * 4;
    double a[3], b[3], c[7], z[2];
    for (int j = 0; j < 3; ++j) {
      a[j] = ba[j];
      b[j] = bb[j];
      for (int i = 0; i < 4; ++i) {
        a[j] += xn[i] * wa[i * 3 + j];
        b[j] += xn[i] * wb[i * 3 + j];
      }
      a[j] = std::max(a[j], 0.0);
      c[j] = a[j] + b[j];
    }
    for (int i = 0; i < 4; ++i) c[3 + i] = xn[i];
    for (int k = 0; k < 2; ++k) {
      z[k] = bo[k];
      for (int j = 0; j < 7; ++j) z[k] += c[j] * wo[j * 2 + k];
    }
    const double m = std::max(z[0], z[1]);
    const double e0 = std::exp(z[0] - m), e1 = std::exp(z[1] - m);
    const double p[2] = {e0 / (e0 + e1), e1 / (e0 + e1)};
    loss += -std::log(p[y[n]]);
    double dz[2], dc[7] = {0};
    for (int k = 0; k < 2; ++k) dz[k] = (p[k] - (k == y[n] ? 1 : 0)) / batch;
    for (int k = 0; k < 2; ++k) {
      g[bo - params.data() + k] += dz[k];
      for (int j = 0; j < 7; ++j) {
        g[wo - params.data() + j * 2 + k] += c[j] * dz[k];
        dc[j] += wo[j * 2 + k] * dz[k];
      }
    }
    for (int j = 0; j < 3; ++j) {
      const double da = a[j] > 0 ? dc[j] : 0.0, db = dc[j];
      g[ba - params.data() + j] += da;
      g[bb - params.data() + j] += db;
      for (int i = 0; i < 4; ++i) {
        g[i * 3 + j] += xn[i] * da;
        g[wb - params.data() + i * 3 + j] += xn[i] * db;
        gx[n * 4 + i] += wa[i * 3 + j] * da + wb[i * 3 + j] * db;
      }
    }
    for (int i = 0; i < 4; ++i) gx[n * 4 + i] += dc[3 + i];  // the concatenate's share
  }
  EXPECT_NEAR(r.loss_sum, loss, 1e-4);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(grads[i], g[i], 1e-5) << "param " << i;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(input_grad[i], gx[i], 1e-5) << "input " << i;
  // A second step on other inputs does not carry sums over from the first.
  for (float& v : x) v = u(rng);
  std::vector<float> again(params.size());
  ASSERT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), batch, again.data()).status());
  ASSERT_OK_AND_ASSIGN(auto fresh, Network::Create(DenseGraph(), batch));
  std::vector<float> once(params.size());
  ASSERT_OK(fresh->ComputeGradients(params.data(), x.data(), y.data(), batch, once.data())
                .status());
  EXPECT_EQ(again, once);
}

// A residual block of convolutions, a flatten read by two layers and the
// input added to a branch: every gradient against central differences.
NetworkSpec ConvGraph() {
  NetworkSpec spec;
  spec.input_dim = 5 * 5 * 2;
  spec.input_shape = {5, 5, 2};
  LayerSpec c1 = Layer(LayerKind::kConv2D, "conv_1");
  c1.units = 2;
  c1.window = {3, 3};
  c1.same_padding = true;
  c1.relu = true;
  LayerSpec c2 = c1;
  c2.name = "conv_2";
  c2.relu = false;
  LayerSpec res = Layer(LayerKind::kAdd, "res");
  res.inputs = {"conv_2", "input"};
  LayerSpec proj = Layer(LayerKind::kConv2D, "proj");
  proj.units = 3;
  proj.window = {1, 1};
  proj.inputs = {"input"};
  LayerSpec cat = Layer(LayerKind::kConcatenate, "cat");
  cat.inputs = {"res", "proj", "res"};
  LayerSpec pool = Layer(LayerKind::kMaxPool2D, "pool");
  pool.window = pool.stride = {2, 2};
  LayerSpec flat = Layer(LayerKind::kFlatten, "flat");
  LayerSpec d1 = Layer(LayerKind::kDense, "d1");
  d1.units = 4;
  d1.relu = true;
  LayerSpec d2 = Layer(LayerKind::kDense, "d2");
  d2.units = 4;
  d2.inputs = {"flat"};
  LayerSpec join = Layer(LayerKind::kAdd, "join");
  join.inputs = {"d1", "d2"};
  LayerSpec logits = Layer(LayerKind::kDense, "logits");
  logits.units = 3;
  spec.layers = {c1, c2, res, proj, cat, pool, flat, d1, d2, join, logits};
  return spec;
}

TEST(NetworkTest, AConvolutionGraphsGradientsMatchCentralDifferences) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(ConvGraph(), 2));
  EXPECT_EQ(net->shapes()[5], (Shape{5, 5, 7}));
  EXPECT_EQ(net->input_shape(3), (Shape{5, 5, 2}));
  CheckStackGradients(ConvGraph(), 3, 11);
}

TEST(NetworkTest, AStackIsSequentialAndGraphErrorsNameTheLayer) {
  ASSERT_OK_AND_ASSIGN(auto stack, Network::Create(FashionCnn(), 2));
  EXPECT_TRUE(stack->sequential());
  EXPECT_EQ(stack->layer_inputs(2), (std::vector<int>{2}));
  auto error = [](const NetworkSpec& spec) {
    return std::string(Network::Create(spec, 2).status().message());
  };
  NetworkSpec spec = DenseGraph();
  spec.layers[2].inputs = {"a", "nope"};
  EXPECT_EQ(error(spec),
            "model layer 2 (sum): input \"nope\" is not a layer before this one (nor \"input\", "
            "the model's input)");
  spec = DenseGraph();
  spec.layers[2].inputs = {"a", "cat"};  // a later layer
  EXPECT_EQ(error(spec),
            "model layer 2 (sum): input \"cat\" is not a layer before this one (nor \"input\", "
            "the model's input)");
  spec = DenseGraph();
  spec.layers[2].inputs = {"a", "input"};
  EXPECT_EQ(error(spec),
            "model layer 2 (sum): add needs inputs of one shape, but input 1 is [4] and input 0 "
            "[3]");
  spec = DenseGraph();
  spec.layers[2].inputs = {"a"};
  EXPECT_EQ(error(spec),
            "model layer 2 (sum): add needs at least two inputs (name them in inputs), not 1");
  spec = DenseGraph();
  spec.layers[1].inputs = {"a", "input"};
  EXPECT_EQ(error(spec), "model layer 1 (b): dense reads one input, not 2");
  spec = DenseGraph();
  spec.layers[2].inputs = {"a", "a"};  // b is read by nobody
  EXPECT_EQ(error(spec),
            "model layer 1 (b): no later layer reads its output (only the last layer's is the "
            "model's)");
  spec = DenseGraph();
  spec.layers[0].name = "input";
  EXPECT_EQ(error(spec),
            "model layer 0 (input): \"input\" names the model's input in a model whose layers "
            "name their inputs");
  spec = ConvGraph();
  spec.layers[4].inputs = {"res", "flat"};
  EXPECT_EQ(error(spec),
            "model layer 4 (cat): input \"flat\" is not a layer before this one (nor \"input\", "
            "the model's input)");
  spec = ConvGraph();
  spec.layers[8].inputs = {"pool"};
  EXPECT_EQ(error(spec),
            "model layer 8 (d2): dense needs a flat [N] input but its input is [2, 2, 7]: put "
            "flatten or global_average_pool1d before it");
}


// MobileNetV2's pieces without batch normalization: a stride-2 stem behind
// Keras's correct_pad, ReLU6 layers, a residual block, an average pool,
// the global average, and a classifier ending in softmax as Keras's
// applications end (the loss applies it to the logits).
NetworkSpec MobileBlocks() {
  NetworkSpec spec;
  spec.input_dim = 6 * 6 * 2;
  spec.input_shape = {6, 6, 2};
  LayerSpec pad = Layer(LayerKind::kZeroPadding2D, "Conv1_pad");
  pad.padding = {0, 1, 0, 1};
  LayerSpec conv = Layer(LayerKind::kConv2D, "Conv1");
  conv.units = 3;
  conv.window = {3, 3};
  conv.stride = {2, 2};
  LayerSpec relu6 = Layer(LayerKind::kReLU, "Conv1_relu");
  relu6.activation = Activation::kRelu6;
  LayerSpec expand = Layer(LayerKind::kConv2D, "expand");
  expand.units = 3;
  expand.window = {1, 1};
  expand.activation = Activation::kSwish;
  LayerSpec add = Layer(LayerKind::kAdd, "block_add");
  add.inputs = {"Conv1_relu", "expand"};
  LayerSpec avg = Layer(LayerKind::kAveragePool2D, "avg");
  avg.window = {2, 2};
  avg.stride = {1, 1};
  avg.same_padding = true;
  LayerSpec gap = Layer(LayerKind::kGlobalAveragePool2D, "gap");
  LayerSpec hidden = Layer(LayerKind::kDense, "hidden");
  hidden.units = 4;
  hidden.activation = Activation::kGelu;
  LayerSpec out = Layer(LayerKind::kDense, "predictions");
  out.units = 3;
  out.activation = Activation::kSoftmax;
  spec.layers = {pad, conv, relu6, expand, add, avg, gap, hidden, out};
  return spec;
}

TEST(NetworkTest, MobileNetPiecesGradientsMatchAndASoftmaxLastLayerIsTheLosss) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(MobileBlocks(), 3));
  EXPECT_EQ(net->shapes()[2], (Shape{3, 3, 3}));
  CheckStackGradients(MobileBlocks(), 3, 13);
  // The same model without the softmax named computes the same bits: the
  // loss applies it once.
  NetworkSpec plain = MobileBlocks();
  plain.layers.back().activation = Activation::kLinear;
  ASSERT_OK_AND_ASSIGN(auto logits, Network::Create(plain, 3));
  const std::vector<float> params = net->InitialParameters(4);
  std::vector<float> x(3 * 72);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) / 11.0f;
  const std::vector<int32_t> y = {0, 2, 1};
  std::vector<float> a(params.size()), b(params.size()), pa, pb;
  ASSERT_OK_AND_ASSIGN(BatchResult ra,
                       net->ComputeGradients(params.data(), x.data(), y.data(), 3, a.data()));
  ASSERT_OK_AND_ASSIGN(BatchResult rb,
                       logits->ComputeGradients(params.data(), x.data(), y.data(), 3, b.data()));
  EXPECT_EQ(ra.loss_sum, rb.loss_sum);
  EXPECT_EQ(a, b);
  ASSERT_OK(net->Evaluate(params.data(), x.data(), y.data(), 3, &pa).status());
  ASSERT_OK(logits->Evaluate(params.data(), x.data(), y.data(), 3, &pb).status());
  EXPECT_EQ(pa, pb);
  EXPECT_NEAR(pa[0] + pa[1] + pa[2], 1.0, 1e-6);  // probabilities, not softmax twice
}

// A zero_padding2d before a convolution (MobileNetV2's before each strided
// depthwise one) is the convolution's own padding on oneDNN: the same loss
// and gradients as the reference, which pads.
TEST(NetworkTest, APaddingBeforeAConvolutionIsFoldedIntoIt) {
  NetworkSpec spec = MobileBlocks();
  // A depthwise convolution after a pad that reads a hidden layer, with
  // padding of every side.
  LayerSpec pad2 = Layer(LayerKind::kZeroPadding2D, "block_pad");
  pad2.padding = {1, 2, 1, 1};
  LayerSpec dw = Layer(LayerKind::kDepthwiseConv2D, "block_depthwise");
  dw.window = {3, 3};
  dw.stride = {2, 2};
  dw.use_bias = false;
  spec.layers.insert(spec.layers.begin() + 5, {pad2, dw});
  ASSERT_OK_AND_ASSIGN(auto folded, Network::Create(spec, 3));
  EXPECT_EQ(folded->folded_paddings(), 2);
  EXPECT_EQ(folded->shapes()[7], (Shape{2, 2, 3}));  // 6x5 padded, 3x3 by 2
  SetCpuKernels(CpuKernels::kReference);
  ASSERT_OK_AND_ASSIGN(auto padded, Network::Create(spec, 3));
  SetCpuKernels(CpuKernels::kOneDnn);
  EXPECT_EQ(padded->folded_paddings(), 0);
  const std::vector<float> params = folded->InitialParameters(6);
  std::vector<float> x(3 * 72);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 31) % 17) / 17.0f - 0.3f;
  const std::vector<int32_t> y = {2, 0, 1};
  std::vector<float> a(params.size()), b(params.size()), da(x.size()), db(x.size());
  ASSERT_OK_AND_ASSIGN(BatchResult ra, folded->ComputeGradients(params.data(), x.data(), y.data(),
                                                                3, a.data(), nullptr, da.data()));
  ASSERT_OK_AND_ASSIGN(BatchResult rb, padded->ComputeGradients(params.data(), x.data(), y.data(),
                                                                3, b.data(), nullptr, db.data()));
  EXPECT_NEAR(ra.loss_sum, rb.loss_sum, 1e-5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
  for (size_t i = 0; i < da.size(); ++i) EXPECT_NEAR(da[i], db[i], 1e-5) << i;
  CheckStackGradients(spec, 3, 19);
}

// Without the input's gradient asked for, nothing in front of the first
// variables is differentiated (the padding, the first convolution's pass
// over its input): the variables' gradients are the same bits.
TEST(NetworkTest, WithoutTheInputGradientTheLayersInFrontAreNotDifferentiated) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(MobileBlocks(), 3));
  const std::vector<float> params = net->InitialParameters(4);
  std::vector<float> x(3 * 72);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 29) % 13) / 13.0f;
  const std::vector<int32_t> y = {1, 0, 2};
  std::vector<float> without(params.size()), with(params.size()), d_x(x.size(), 0.0f);
  ASSERT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), 3, without.data()));
  ASSERT_OK(net->ComputeGradients(params.data(), x.data(), y.data(), 3, with.data(), nullptr,
                                  d_x.data()));
  EXPECT_EQ(without, with);
  double norm = 0;
  for (float v : d_x) norm += std::abs(v);
  EXPECT_GT(norm, 0.0);  // asked for, the input's gradient is written
}

// MobileNetV2's inverted residual block as Keras builds it: convolutions
// without a bias, each followed by a batch normalization.
NetworkSpec NormalisedBlock() {
  NetworkSpec spec;
  spec.input_dim = 5 * 5 * 2;
  spec.input_shape = {5, 5, 2};
  LayerSpec expand = Layer(LayerKind::kConv2D, "expand");
  expand.units = 4;
  expand.window = {1, 1};
  expand.use_bias = false;
  LayerSpec expand_bn = Layer(LayerKind::kBatchNormalization, "expand_BN");
  // Smooth where MobileNetV2 has relu6: central differences across a kink
  // are not the gradient.
  LayerSpec relu = Layer(LayerKind::kActivation, "expand_relu");
  relu.activation = Activation::kSwish;
  LayerSpec dw = Layer(LayerKind::kDepthwiseConv2D, "depthwise");
  dw.window = {3, 3};
  dw.same_padding = true;
  dw.use_bias = false;
  LayerSpec dw_bn = Layer(LayerKind::kBatchNormalization, "depthwise_BN");
  dw_bn.center = false;
  LayerSpec project = Layer(LayerKind::kConv2D, "project");
  project.units = 2;
  project.window = {1, 1};
  project.use_bias = false;
  LayerSpec project_bn = Layer(LayerKind::kBatchNormalization, "project_BN");
  project_bn.momentum = 0.9f;
  LayerSpec add = Layer(LayerKind::kAdd, "add");
  add.inputs = {"input", "project_BN"};
  LayerSpec gap = Layer(LayerKind::kGlobalAveragePool2D, "gap");
  LayerSpec out = Layer(LayerKind::kDense, "predictions");
  out.units = 3;
  out.activation = Activation::kSoftmax;
  spec.layers = {expand, expand_bn, relu, dw, dw_bn, project, project_bn, add, gap, out};
  return spec;
}

TEST(NetworkTest, BatchNormalizedBlocksVariablesAreKerassAndTheirGradientsMatch) {
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(NormalisedBlock(), 3));
  std::vector<std::string> names;
  std::vector<VariableUpdate> updates;
  for (const VariableDef& v : net->variables()) {
    names.push_back(v.name);
    updates.push_back(v.update);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "expand/kernel", "expand_BN/gamma", "expand_BN/beta",
                       "expand_BN/moving_mean", "expand_BN/moving_variance",
                       "depthwise/depthwise_kernel", "depthwise_BN/gamma",
                       "depthwise_BN/moving_mean", "depthwise_BN/moving_variance", "project/kernel",
                       "project_BN/gamma", "project_BN/beta", "project_BN/moving_mean",
                       "project_BN/moving_variance", "predictions/kernel", "predictions/bias"}));
  constexpr VariableUpdate kOpt = VariableUpdate::kOptimizer, kInc = VariableUpdate::kIncrement;
  EXPECT_EQ(updates, (std::vector<VariableUpdate>{kOpt, kOpt, kOpt, kInc, kInc, kOpt, kOpt, kInc,
                                                  kInc, kOpt, kOpt, kOpt, kInc, kInc, kOpt,
                                                  kOpt}));
  // gamma and the moving variance start at one, beta and the moving mean
  // at zero (Keras's initializers).
  const std::vector<float> params = net->InitialParameters(3);
  auto values = [&](int v) {
    const float* p = params.data() + net->offsets()[v];
    return std::vector<float>(p, p + net->variables()[v].elements());
  };
  EXPECT_EQ(values(1), std::vector<float>(4, 1.0f));
  EXPECT_EQ(values(2), std::vector<float>(4, 0.0f));
  EXPECT_EQ(values(3), std::vector<float>(4, 0.0f));
  EXPECT_EQ(values(4), std::vector<float>(4, 1.0f));
  CheckStackGradients(NormalisedBlock(), 3, 17);
}

// trainable: false freezes a layer's variables, a batch normalization's
// statistics with them.
TEST(NetworkTest, AFrozenLayersVariablesAreFrozen) {
  NetworkSpec spec = NormalisedBlock();
  spec.layers[0].trainable = false;
  spec.layers[1].trainable = false;
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(spec, 3));
  for (int v = 0; v < 5; ++v) {
    EXPECT_EQ(net->variables()[v].update, VariableUpdate::kFrozen) << net->variables()[v].name;
  }
  EXPECT_EQ(net->variables()[5].update, VariableUpdate::kOptimizer);
  EXPECT_EQ(net->variables()[7].update, VariableUpdate::kIncrement);
}

// The graph alone describes the model: positions, shapes, where each
// layer's variables lie, with no executor built; a Network over the same
// spec lays its variables out the same way.
TEST(NetworkTest, TheModelGraphDescribesTheModelWithoutComputingIt) {
  ASSERT_OK_AND_ASSIGN(ModelGraph graph, ModelGraph::Create(NormalisedBlock()));
  EXPECT_FALSE(graph.sequential());
  ASSERT_EQ(graph.shapes().size(), 11u);
  EXPECT_EQ(graph.shapes()[1], (Shape{5, 5, 4}));  // expand
  EXPECT_EQ(graph.shapes()[9], (Shape{2}));        // gap
  EXPECT_EQ(graph.layer_inputs(7), (std::vector<int>{0, 7}));  // add: input, project_BN
  EXPECT_EQ(graph.input_shape(8), (Shape{5, 5, 2}));
  // expand (kernel only), expand_BN, relu (none), depthwise, ...
  EXPECT_EQ(graph.param_layer(0), 0);
  EXPECT_EQ(graph.param_layer(1), 1);
  EXPECT_EQ(graph.param_layer(2), -1);
  EXPECT_EQ(graph.kernel_at(0), 0);
  EXPECT_EQ(graph.bias_at(0), -1);
  EXPECT_EQ(graph.kernel_at(1), 2 * 4);  // after expand's [1, 1, 2, 4] kernel
  EXPECT_EQ(graph.kernel_at(2), -1);
  const int last = 9;
  EXPECT_EQ(graph.bias_at(last), graph.kernel_at(last) + 2 * 3);
  for (int p = 0; p < 11; ++p) EXPECT_EQ(graph.storage(p), p);

  ASSERT_OK_AND_ASSIGN(ModelGraph cnn, ModelGraph::Create(FashionCnn()));
  // flatten's output is its input's memory.
  for (size_t l = 0; l < cnn.spec().layers.size(); ++l) {
    const bool flatten = cnn.spec().layers[l].kind == LayerKind::kFlatten;
    EXPECT_EQ(cnn.storage(l + 1), flatten ? static_cast<int>(l) : static_cast<int>(l) + 1);
  }

  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(NormalisedBlock(), 2));
  ASSERT_EQ(net->variables().size(), graph.variables().size());
  for (size_t v = 0; v < graph.variables().size(); ++v) {
    EXPECT_EQ(net->variables()[v].name, graph.variables()[v].name);
    EXPECT_EQ(net->offsets()[v], graph.offsets()[v]);
    EXPECT_EQ(net->variables()[v].initializer, graph.variables()[v].initializer);
  }
  EXPECT_EQ(net->InitialParameters(5), graph.InitialParameters(5));
  EXPECT_EQ(ModelGraph::Create(NetworkSpec{}).status().message(), "model has no layers");
}

}  // namespace
}  // namespace pstrain::model
