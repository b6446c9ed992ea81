// Google Benchmark of one CPU training step (Network::ComputeGradients:
// forward, loss, backward) of the configs' models on one thread (OpenBLAS
// and oneDNN), on real Fashion-MNIST training images (/usr/share/datasets/fashion-mnist,
// or $PSTRAIN_DATA_DIR) at each config's batch size: the tutorial CNN
// (configs/fashion_mnist_cnn.pbtxt), the guide MLP, the residual graph
// (configs/fashion_mnist_resnet.pbtxt) and MobileNetV2's pieces with batch
// normalization (configs/fashion_mnist_mobile.pbtxt). Items are examples;
// the counter says how many layers read more than the layer before them.
//   bazel build -c opt //bench:network_bench
//   bazel-bin/bench/network_bench --benchmark_repetitions=5
#include <string>
#include <vector>

#include "bench/fashion_mnist_images.h"
#include "benchmark/benchmark.h"
#include "data/dataset.h"
#include "model/compute_threads.h"
#include "model/model_config.h"
#include "model/network.h"

namespace pstrain::model {
namespace {

constexpr int kBatches = 50;

const data::Dataset& Images() { return bench::FashionMnistTrainImages("network_bench"); }

void BM_Step(benchmark::State& state, const char* config) {
  SetComputeThreads(1);
  auto file = LoadModelConfigFile(config);
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  const int batch = static_cast<int>(file->job.batch_size);
  auto net = Network::Create(file->job.model, batch);
  if (!net.ok()) {
    state.SkipWithError(std::string(net.status().message()).c_str());
    return;
  }
  const data::Dataset& images = Images();
  std::vector<float> params = (*net)->InitialParameters(1), grads(params.size());
  int64_t i = 0;
  for (auto _ : state) {
    const int64_t at = (i++ % kBatches) * batch;
    auto r = (*net)->ComputeGradients(params.data(), images.features.data() + at * 784,
                                      images.labels.data() + at, batch, grads.data());
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(grads.data());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["batch"] = batch;
  int graph_layers = 0;
  for (size_t l = 0; l < (*net)->spec().layers.size(); ++l) {
    const int at = static_cast<int>(l);
    graph_layers += (*net)->layer_inputs(at) != std::vector<int>{at};
  }
  state.counters["graph_layers"] = graph_layers;
}
BENCHMARK_CAPTURE(BM_Step, fashion_mnist_mlp, "configs/fashion_mnist_mlp.pbtxt")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Step, fashion_mnist_cnn, "configs/fashion_mnist_cnn.pbtxt")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Step, fashion_mnist_resnet, "configs/fashion_mnist_resnet.pbtxt")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Step, fashion_mnist_mobile, "configs/fashion_mnist_mobile.pbtxt")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pstrain::model
