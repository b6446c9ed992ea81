#include "model/backend.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/compute_threads.h"
#include "model/cuda_device.h"

namespace pstrain::model {
namespace {

// Each test runs on the CPU, and on CUDA where a device is usable (reported
// as skipped otherwise).
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda") {
      auto devices = ListCudaDevices();
      if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
    }
  }
};

double MeanLoss(Backend& b, const std::vector<float>& p, const std::vector<float>& x,
                const std::vector<int32_t>& y) {
  auto r = b.Evaluate(p.data(), x.data(), y.data(), static_cast<int64_t>(y.size()));
  EXPECT_OK(r);
  return r->loss_sum / r->count;
}

// Every parameter of every layer (kernels and biases, through ReLU and
// linear layers and the softmax cross-entropy loss) against central
// differences of the loss.
TEST_P(BackendTest, GradientsOfEveryLayerMatchNumericalDerivatives) {
  NetworkSpec spec = NetworkSpec::FromWidths(5, {4, 3}, 3);
  spec.layers[1].relu = false;  // one linear hidden layer
  ASSERT_OK_AND_ASSIGN(auto backend, CreateBackend(spec, 4, *ParseDevice(GetParam())));
  EXPECT_EQ(backend->name(), GetParam());
  std::vector<float> params = backend->network().InitialParameters(3);
  std::mt19937 rng(11);
  std::normal_distribution<float> n01;
  for (float& p : params) p += 0.1f * n01(rng);
  std::vector<float> x(4 * 5);
  for (float& v : x) v = n01(rng);
  const std::vector<int32_t> y = {0, 2, 1, 2};
  std::vector<float> grads(backend->network().num_parameters());
  ASSERT_OK_AND_ASSIGN(
      BatchResult r, backend->ComputeGradients(params.data(), x.data(), y.data(), 4, grads.data()));
  EXPECT_EQ(r.count, 4);
  EXPECT_NEAR(r.loss_sum / 4, MeanLoss(*backend, params, x, y), 1e-5);
  const auto& vars = backend->network().variables();
  const auto& offsets = backend->network().offsets();
  const float eps = 1e-2f;
  for (size_t v = 0; v < vars.size(); ++v) {
    for (int64_t i = offsets[v]; i < offsets[v] + vars[v].elements(); ++i) {
      std::vector<float> plus = params, minus = params;
      plus[i] += eps;
      minus[i] -= eps;
      const double numeric =
          (MeanLoss(*backend, plus, x, y) - MeanLoss(*backend, minus, x, y)) / (2 * eps);
      EXPECT_NEAR(grads[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << vars[v].name << " element " << i - offsets[v];
    }
  }
}

TEST_P(BackendTest, RejectsBadBatchAndLabelsLeavingGradientsUntouched) {
  ASSERT_OK_AND_ASSIGN(auto backend,
                       CreateBackend(NetworkSpec::FromWidths(2, {}, 3), 2, *ParseDevice(GetParam())));
  std::vector<float> p = backend->network().InitialParameters(1);
  std::vector<float> g(backend->network().num_parameters(), 7.0f);
  std::vector<float> x(6, 0.5f);
  std::vector<int32_t> y = {0, 3, 1};
  EXPECT_EQ(backend->ComputeGradients(p.data(), x.data(), y.data(), 3, g.data()).status().message(),
            "batch of 3 is outside 1..2");
  EXPECT_EQ(backend->ComputeGradients(p.data(), x.data(), y.data(), 2, g.data()).status().message(),
            "label 3 of example 1 is outside [0, 3)");
  EXPECT_EQ(g[0], 7.0f);
}

INSTANTIATE_TEST_SUITE_P(Devices, BackendTest, ::testing::Values("cpu", "cuda"),
                         [](const auto& info) { return info.param; });

// The largest |a[i]| and the largest |a[i] - b[i]|.
std::pair<double, double> LargestAndLargestDifference(const std::vector<float>& a,
                                                      const std::vector<float>& b) {
  double largest = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::fabs(double{a[i]}));
    diff = std::max(diff, std::fabs(double{a[i]} - b[i]));
  }
  return {largest, diff};
}

// A full training step of the Fashion-MNIST guide model on both backends:
// loss, accuracy and every gradient agree to float tolerance.
TEST(CpuVsCudaTest, AFullStepOfTheGuideModelAgrees) {
  auto devices = ListCudaDevices();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  const NetworkSpec spec = NetworkSpec::FromWidths(784, {256, 256}, 10);
  ASSERT_OK_AND_ASSIGN(auto cpu, CreateBackend(spec, 32, Device::Cpu()));
  ASSERT_OK_AND_ASSIGN(auto cuda, CreateBackend(spec, 32, Device::Cuda()));
  const std::vector<float> params = cpu->network().InitialParameters(7);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(32 * 784);
  for (float& v : x) v = pixel(rng);
  std::vector<int32_t> y(32);
  for (int i = 0; i < 32; ++i) y[i] = i % 10;
  std::vector<float> g_cpu(params.size()), g_cuda(params.size());
  ASSERT_OK_AND_ASSIGN(BatchResult a,
                       cpu->ComputeGradients(params.data(), x.data(), y.data(), 32, g_cpu.data()));
  ASSERT_OK_AND_ASSIGN(
      BatchResult b, cuda->ComputeGradients(params.data(), x.data(), y.data(), 32, g_cuda.data()));
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-3 * std::fabs(a.loss_sum));
  EXPECT_EQ(a.correct, b.correct);
  const auto [max_grad, max_diff] = LargestAndLargestDifference(g_cpu, g_cuda);
  EXPECT_GT(max_grad, 1e-3);
  EXPECT_LT(max_diff, 1e-4 * max_grad + 1e-6) << "largest gradient difference, CPU vs CUDA";
  double copy_s = 0, total_s = 0;
  cuda->LastStepTiming(&copy_s, &total_s);
  EXPECT_GT(total_s, 0);
  EXPECT_LE(copy_s, total_s * 2);  // copies overlap compute, but each is within the step
}

// An embedding-bag model's dense part on both backends: the gradient with
// respect to its input (what the bag's backward pass starts from) agrees.
TEST(CpuVsCudaTest, TheInputGradientForAnEmbeddingBagAgrees) {
  auto devices = ListCudaDevices();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  NetworkSpec spec = NetworkSpec::FromWidths(784, {128}, 10);
  spec.embeddings = {
      {"pixels", 3136, 32, EmbeddingBagSpec::Combiner::kSum, "pixel_buckets:4", "uniform:0.05"}};
  ASSERT_OK_AND_ASSIGN(auto cpu, CreateBackend(spec, 32, Device::Cpu()));
  ASSERT_OK_AND_ASSIGN(auto cuda, CreateBackend(spec, 32, Device::Cuda()));
  const std::vector<float> params = cpu->network().InitialParameters(7);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> in(32 * 32);
  for (float& v : in) v = u(rng);
  std::vector<int32_t> y(32);
  for (int i = 0; i < 32; ++i) y[i] = i % 10;
  std::vector<float> g_cpu(params.size()), g_cuda(params.size());
  std::vector<float> dx_cpu(in.size()), dx_cuda(in.size());
  ASSERT_OK(cpu->ComputeGradients(params.data(), in.data(), y.data(), 32, g_cpu.data(), nullptr,
                                  dx_cpu.data())
                .status());
  ASSERT_OK(cuda->ComputeGradients(params.data(), in.data(), y.data(), 32, g_cuda.data(), nullptr,
                                   dx_cuda.data())
                .status());
  const auto [max_dx, max_diff] = LargestAndLargestDifference(dx_cpu, dx_cuda);
  EXPECT_GT(max_dx, 1e-4);
  EXPECT_LT(max_diff, 1e-4 * max_dx + 1e-7) << "largest input-gradient difference, CPU vs CUDA";
}

// One training step of `spec` (dropout seeded alike) on both backends, from
// the same parameters and a random input: loss, accuracy, every gradient,
// the input gradient and, with the sigmoid loss, the scores agree; then a
// forward-only pass of the same batch (dropout off) agrees too.
void ExpectAStepAgrees(const NetworkSpec& spec, int batch) {
  ASSERT_OK_AND_ASSIGN(auto cpu, CreateBackend(spec, batch, Device::Cpu()));
  auto devices = ListCudaDevices();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  ASSERT_OK_AND_ASSIGN(auto cuda, CreateBackend(spec, batch, Device::Cuda()));
  ASSERT_EQ(cuda->name(), "cuda");
  const int64_t width = cpu->network().input_width();
  const std::vector<float> params = cpu->network().InitialParameters(7);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(batch * width);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % spec.num_classes();
  cpu->SetStepSeed(StepSeed(5, 1, 17));
  cuda->SetStepSeed(StepSeed(5, 1, 17));
  std::vector<float> g_cpu(params.size()), g_cuda(params.size());
  std::vector<float> dx_cpu(x.size()), dx_cuda(x.size());
  ASSERT_OK_AND_ASSIGN(BatchResult a,
                       cpu->ComputeGradients(params.data(), x.data(), y.data(), batch, g_cpu.data(),
                                             nullptr, dx_cpu.data()));
  ASSERT_OK_AND_ASSIGN(
      BatchResult b, cuda->ComputeGradients(params.data(), x.data(), y.data(), batch, g_cuda.data(),
                                            nullptr, dx_cuda.data()));
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-4 * std::fabs(a.loss_sum));
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(a.count, b.count);
  const auto [max_grad, max_diff] = LargestAndLargestDifference(g_cpu, g_cuda);
  EXPECT_GT(max_grad, 1e-4);
  EXPECT_LT(max_diff, 1e-4 * max_grad + 1e-7) << "largest gradient difference, CPU vs CUDA";
  const auto [max_dx, max_dx_diff] = LargestAndLargestDifference(dx_cpu, dx_cuda);
  EXPECT_GT(max_dx, 1e-6);
  EXPECT_LT(max_dx_diff, 1e-4 * max_dx + 1e-8) << "largest input-gradient difference";
  if (spec.binary()) {
    BatchResult sa, sb;
    sa.Add(a);
    sb.Add(b);
    EXPECT_NEAR(sa.Auc(), sb.Auc(), 1e-3);
  }
  ASSERT_OK_AND_ASSIGN(BatchResult ea, cpu->Evaluate(params.data(), x.data(), y.data(), batch));
  ASSERT_OK_AND_ASSIGN(BatchResult eb, cuda->Evaluate(params.data(), x.data(), y.data(), batch));
  EXPECT_NEAR(ea.loss_sum, eb.loss_sum, 1e-4 * std::fabs(ea.loss_sum));
  EXPECT_EQ(ea.correct, eb.correct);
  if (spec.binary()) {
    EXPECT_NEAR(ea.Auc(), eb.Auc(), 1e-3);
  }
  double copy_s = 0, total_s = 0;
  cuda->LastStepTiming(&copy_s, &total_s);
  EXPECT_GT(total_s, 0);
  EXPECT_LE(copy_s, total_s);
}

LayerSpec Layer1(LayerKind kind, const std::string& name, int units = 0, int k = 1, int s = 1,
                 bool relu = false, bool same = false) {
  LayerSpec l;
  l.kind = kind;
  l.name = name;
  l.units = units;
  l.relu = relu;
  l.same_padding = same;
  const bool two_d = kind == LayerKind::kConv2D || kind == LayerKind::kMaxPool2D;
  l.window = {two_d ? k : 1, k};
  l.stride = {two_d ? s : 1, s};
  return l;
}

// configs/fashion_mnist_cnn.pbtxt's stack, with a dropout.
TEST(CpuVsCudaTest, AStepOfTheFashionCnnAgrees) {
  NetworkSpec spec;
  spec.input_dim = 784;
  spec.input_shape = {28, 28, 1};
  spec.layers = {Layer1(LayerKind::kConv2D, "conv2d_0", 32, 3, 1, true),
                 Layer1(LayerKind::kMaxPool2D, "max_pool2d_0", 0, 2, 2),
                 Layer1(LayerKind::kFlatten, "flatten_0"),
                 Layer1(LayerKind::kDense, "dense_0", 128, 1, 1, true),
                 Layer1(LayerKind::kDropout, "dropout_0"),
                 Layer1(LayerKind::kDense, "dense_1", 10)};
  spec.layers[4].rate = 0.25f;
  ExpectAStepAgrees(spec, 32);
}

// The seeds' text CNN after its embedding (whose rows the host gathers):
// [300, 7] sequences, two convolutions and pools, 46 topics.
TEST(CpuVsCudaTest, AStepOfTheTextCnnAgrees) {
  NetworkSpec spec;
  spec.input_dim = 300 * 7;
  spec.input_shape = {300, 7};
  spec.layers = {Layer1(LayerKind::kConv1D, "conv1d_0", 64, 5, 1, true),
                 Layer1(LayerKind::kMaxPool1D, "max_pool1d_0", 0, 2, 2),
                 Layer1(LayerKind::kConv1D, "conv1d_1", 32, 3, 1, true),
                 Layer1(LayerKind::kMaxPool1D, "max_pool1d_1", 0, 2, 2),
                 Layer1(LayerKind::kFlatten, "flatten_0"),
                 Layer1(LayerKind::kDense, "dense_0", 46)};
  ExpectAStepAgrees(spec, 32);
}

// Odd shapes: "same" padding with strides that do not divide the input,
// overlapping pool windows, a global average pool, and the sigmoid loss.
TEST(CpuVsCudaTest, AStepWithSamePaddingStridesAndTheSigmoidLossAgrees) {
  NetworkSpec spec;
  spec.input_dim = 13 * 11 * 3;
  spec.input_shape = {13, 11, 3};
  spec.layers = {Layer1(LayerKind::kConv2D, "conv2d_0", 8, 3, 2, true, true),
                 Layer1(LayerKind::kMaxPool2D, "max_pool2d_0", 0, 3, 1, false, true),
                 Layer1(LayerKind::kFlatten, "flatten_0"), Layer1(LayerKind::kDense, "dense_0", 1)};
  spec.loss = Loss::kSigmoidCrossEntropy;
  ExpectAStepAgrees(spec, 17);

  NetworkSpec seq;
  seq.input_dim = 20 * 6;
  seq.input_shape = {20, 6};
  seq.layers = {Layer1(LayerKind::kConv1D, "conv1d_0", 5, 4, 3, true, true),
                Layer1(LayerKind::kDropout, "dropout_0"),
                Layer1(LayerKind::kGlobalAveragePool1D, "global_average_pool1d_0"),
                Layer1(LayerKind::kDense, "dense_0", 4, 1, 1, true),
                Layer1(LayerKind::kDense, "dense_1", 1)};
  seq.layers[1].rate = 0.5f;
  seq.loss = Loss::kSigmoidCrossEntropy;
  ExpectAStepAgrees(seq, 9);
}

TEST(CreateBackendTest, AutoFallsBackToTheCpuAndCudaSaysWhy) {
  const NetworkSpec spec = NetworkSpec::FromWidths(4, {3}, 2);
  ASSERT_OK_AND_ASSIGN(auto automatic, CreateBackend(spec, 8, Device::Auto()));
  auto devices = ListCudaDevices();
  if (devices.ok()) {
    EXPECT_EQ(automatic->name(), "cuda");
  } else {
    EXPECT_EQ(automatic->name(), "cpu");
    auto cuda = CreateBackend(spec, 8, Device::Cuda());
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(cuda.status().message(), devices.status().message());
  }
  EXPECT_EQ(CreateBackend(NetworkSpec{4, {}}, 8, Device::Cpu()).status().message(), "model has no layers");
}

// A convolution model says what computes it: oneDNN for its convolution
// on the compute threads, OpenBLAS on one thread for its dense layers; an
// MLP, OpenBLAS on the compute threads.
TEST(CreateBackendTest, TheCpuBackendNamesOneDnnAndTheThreadsItUses) {
  using ::testing::HasSubstr;
  SetComputeThreads(2);
  NetworkSpec cnn;
  cnn.input_dim = 8 * 8;
  cnn.input_shape = {8, 8, 1};
  cnn.layers = {Layer1(LayerKind::kConv2D, "conv2d_0", 4, 3, 1, true),
                Layer1(LayerKind::kFlatten, "flatten_0"), Layer1(LayerKind::kDense, "dense_0", 3)};
  ASSERT_OK_AND_ASSIGN(auto conv, CreateBackend(cnn, 4, Device::Cpu()));
  EXPECT_THAT(conv->Describe(),
              HasSubstr("cpu: oneDNN (1 layer) on 2 threads, OpenBLAS sgemm, 1 thread, "));
  const NetworkSpec mlp_spec = NetworkSpec::FromWidths(4, {3}, 2);
  ASSERT_OK_AND_ASSIGN(auto mlp, CreateBackend(mlp_spec, 4, Device::Cpu()));
  EXPECT_THAT(mlp->Describe(), HasSubstr("cpu: OpenBLAS sgemm, 2 threads, "));
  SetComputeThreads(1);
  ASSERT_OK_AND_ASSIGN(auto one, CreateBackend(mlp_spec, 4, Device::Cpu()));
  EXPECT_THAT(one->Describe(), HasSubstr("cpu: OpenBLAS sgemm, 1 thread, "));
}

// Graphs and the image layers run on the CPU: --device=cuda says so (with
// a device or without one), auto computes there and says why.
TEST(CreateBackendTest, WhatTheCudaLayersDoNotComputeRunsOnTheCpu) {
  NetworkSpec graph = NetworkSpec::FromWidths(4, {3, 3}, 2);
  graph.layers[1].inputs = {"input"};
  LayerSpec add;
  add.kind = LayerKind::kAdd;
  add.name = "add";
  add.inputs = {"dense_0", "dense_1"};
  graph.layers.insert(graph.layers.begin() + 2, add);
  NetworkSpec tanh = NetworkSpec::FromWidths(4, {3}, 2);
  tanh.layers[0].relu = false;
  tanh.layers[0].activation = Activation::kTanh;
  NetworkSpec softmax = NetworkSpec::FromWidths(4, {3}, 2);
  softmax.layers[1].activation = Activation::kSoftmax;  // the loss's: CUDA takes it
  for (const auto& [spec, message] : std::vector<std::pair<NetworkSpec, std::string>>{
           {graph,
            "cuda: the CUDA layers do not compute a graph (this layer reads input) (layer "
            "dense_1): the model runs on --device=cpu"},
           {tanh,
            "cuda: the CUDA layers do not compute activation tanh (layer dense_0): the model "
            "runs on --device=cpu"},
       }) {
    auto cuda = CreateBackend(spec, 8, Device::Cuda());
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(cuda.status().message(), message);
    ASSERT_OK_AND_ASSIGN(auto automatic, CreateBackend(spec, 8, Device::Auto()));
    EXPECT_EQ(automatic->name(), "cpu");
    EXPECT_NE(automatic->Describe().find(message), std::string::npos) << automatic->Describe();
  }
  auto cuda = CreateBackend(softmax, 8, Device::Cuda());
  if (!ListCudaDevices().ok()) EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable);
}

TEST(CudaGemmSecondsTest, AnEmptyListOrABadSideIsInvalidArgument) {
  EXPECT_EQ(CudaGemmSeconds(0, {}, 0.1).status().message(), "CudaGemmSeconds: no products to time");
  GemmShape bad;
  bad.m = 4;
  bad.n = 0;
  bad.k = 3;
  GemmShape good = bad;
  good.n = 2;
  EXPECT_EQ(CudaGemmSeconds(0, {good, bad}, 0.1).status().message(),
            "CudaGemmSeconds: product 1 has m=4 n=0 k=3: each must lie in [1, 2^31)");
  GemmShape huge = bad;
  huge.n = int64_t{1} << 31;
  EXPECT_EQ(CudaGemmSeconds(0, {huge}, 0.1).status().code(), absl::StatusCode::kInvalidArgument);
}

// The guide model's step products on the device: a larger batch takes
// longer, at a rate no GPU reaches unless the timing is broken. Without a
// device, CUDA's reason.
TEST(CudaGemmSecondsTest, TimesAStepsProductsOnTheDevice) {
  const NetworkSpec spec = NetworkSpec::FromWidths(784, {128}, 10);
  ASSERT_OK_AND_ASSIGN(auto net, Network::Create(spec, 1024));
  const std::vector<GemmShape> small = net->StepGemms(32), large = net->StepGemms(1024);
  auto devices = ListCudaDevices();
  if (!devices.ok()) {
    auto none = CudaGemmSeconds(0, small, 0.01);
    EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_FALSE(none.status().message().empty());
    GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  }
  ASSERT_OK_AND_ASSIGN(double t_small, CudaGemmSeconds(0, small, 0.2));
  ASSERT_OK_AND_ASSIGN(double t_large, CudaGemmSeconds(0, large, 0.2));
  double flop = 0;
  for (const GemmShape& g : large) flop += 2.0 * g.m * g.n * g.k;
  EXPECT_GT(t_small, 0);
  EXPECT_GT(t_large, t_small);
  EXPECT_LT(flop / t_large, 1e15) << t_large << " s for " << flop << " FLOP";
}

}  // namespace
}  // namespace pstrain::model
