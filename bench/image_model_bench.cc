// Google Benchmark of a whole CPU training step of Keras's image
// applications (model/applications.h) as PyTorch is timed against them:
// forward, loss, backward (Network::ComputeGradients) and Adam on every
// trainable variable (the moving statistics take their increments; both
// split across the cores as the PS's shard store splits them), on
// random images and labels of the application's input, 10 classes, after
// one step outside the timing (oneDNN builds its primitives there). The
// CPU kernels (model/layers.h's CpuKernels: oneDNN, or the reference) are
// the case's second argument; threads are model::ComputeThreads() (the
// cores, or $PSTRAIN_BENCH_THREADS). Items are examples; the counters say
// the threads, the batch and how many layers oneDNN computed.
//   bazel build -c opt //bench:image_model_bench
//   bazel-bin/bench/image_model_bench --benchmark_filter=onednn
// The PyTorch side (torchvision's mobilenet_v2 and resnet50, Adam,
// torch.set_num_threads of the same count, channels-last) is a script of
// a few lines outside the repo: BENCHMARKS.md says what it ran.
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/parallel_for.h"
#include "benchmark/benchmark.h"
#include "model/compute_threads.h"
#include "model/layers.h"
#include "model/model_config.h"
#include "model/network.h"
#include "optim/optimizer.h"

namespace pstrain::model {
namespace {

constexpr int64_t kGrain = 1 << 18;  // floats per share of an update, as the store's

struct Case {
  const char* application;
  double alpha;  // mobilenet_v2's
  int size;      // the input's height and width (3 channels)
  int batch;
};

void BM_TrainingStep(benchmark::State& state, Case c, CpuKernels kernels) {
  if (const char* t = std::getenv("PSTRAIN_BENCH_THREADS")) SetComputeThreads(std::atoi(t));
  SetCpuKernels(kernels);
  const std::string text = absl::StrCat(
      "application { name: \"", c.application, "\" input_shape: [", c.size, ", ", c.size,
      ", 3] classes: 10", c.alpha > 0 ? absl::StrCat(" alpha: ", c.alpha) : "",
      " }\nloss: softmax_cross_entropy\noptimizer { name: \"adam\" learning_rate: 0.001 }\n",
      "batch_size: ", c.batch, "\n");
  auto file = ParseModelConfigFile(text, "image_model_bench");
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  auto net = Network::Create(file->job.model, c.batch);
  if (!net.ok()) {
    state.SkipWithError(std::string(net.status().message()).c_str());
    return;
  }
  Network& n = **net;
  SetBlasThreadsFor(n.onednn_layers() > 0);  // as the CPU backend does
  OptimizerSpec adam;
  adam.name = "adam";
  adam.learning_rate = 0.001f;
  auto optimizer = optim::CreateOptimizer(adam);
  if (!optimizer.ok()) {
    state.SkipWithError(std::string(optimizer.status().message()).c_str());
    return;
  }
  std::vector<float> params = n.InitialParameters(1), grads(params.size());
  std::vector<float> m(params.size(), 0.0f), v(params.size(), 0.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(static_cast<size_t>(c.batch) * n.input_width());
  for (float& f : x) f = u(rng);
  std::vector<int32_t> labels(c.batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 10);
  int64_t t = 0;
  auto step = [&] {
    auto r = n.ComputeGradients(params.data(), x.data(), labels.data(), c.batch, grads.data());
    benchmark::DoNotOptimize(r);
    ++t;
    for (size_t i = 0; i < n.variables().size(); ++i) {
      const VariableDef& def = n.variables()[i];
      const int64_t at = n.offsets()[i], size = def.elements();
      // In shares on the cores, as the PS's shard store applies updates.
      ParallelFor(size, kGrain, [&](int64_t first, int64_t last) {
        const int64_t from = at + first, count = last - first;
        if (!def.trainable()) {  // a moving statistic: its increment
          for (int64_t k = from; k < from + count; ++k) params[k] += grads[k];
          return;
        }
        const absl::Span<float> slots[] = {absl::MakeSpan(m.data() + from, count),
                                           absl::MakeSpan(v.data() + from, count)};
        (*optimizer)->Apply(absl::MakeSpan(params.data() + from, count),
                            absl::MakeConstSpan(grads.data() + from, count), slots, t);
      });
    }
  };
  step();  // oneDNN's primitives are built in the first
  for (auto _ : state) step();
  state.SetItemsProcessed(state.iterations() * c.batch);
  state.counters["threads"] = ComputeThreads();
  state.counters["batch"] = c.batch;
  state.counters["onednn_layers"] = n.onednn_layers();
  state.counters["folded_pads"] = n.folded_paddings();
  SetCpuKernels(CpuKernels::kOneDnn);
}

#define IMAGE_CASE(name, app, alpha, size, batch)                                     \
  BENCHMARK_CAPTURE(BM_TrainingStep, name##_onednn, Case{app, alpha, size, batch},    \
                    CpuKernels::kOneDnn)                                              \
      ->Unit(benchmark::kMillisecond)                                                 \
      ->MeasureProcessCPUTime()                                                       \
      ->UseRealTime();                                                                \
  BENCHMARK_CAPTURE(BM_TrainingStep, name##_reference, Case{app, alpha, size, batch}, \
                    CpuKernels::kReference)                                           \
      ->Unit(benchmark::kMillisecond)                                                 \
      ->MeasureProcessCPUTime()                                                       \
      ->UseRealTime()

IMAGE_CASE(mobilenet_v2_a035_32x32_b64, "mobilenet_v2", 0.35, 32, 64);
IMAGE_CASE(mobilenet_v2_a035_96x96_b64, "mobilenet_v2", 0.35, 96, 64);
IMAGE_CASE(mobilenet_v2_a100_96x96_b32, "mobilenet_v2", 1.0, 96, 32);
IMAGE_CASE(mobilenet_v2_a100_224x224_b16, "mobilenet_v2", 1.0, 224, 16);
IMAGE_CASE(resnet50_96x96_b64, "resnet50", -1, 96, 64);
IMAGE_CASE(resnet50_224x224_b8, "resnet50", -1, 224, 8);

}  // namespace
}  // namespace pstrain::model
