// Google Benchmark of the embedding-bag layer's per-step work on one core,
// on batches of 32 real Fashion-MNIST training images
// (/usr/share/datasets/fashion-mnist, or $PSTRAIN_DATA_DIR), with
// configs/fashion_mnist_bag.pbtxt's layer (pixel_buckets:4, dim 32, sum):
// turning a batch into bags of ids, the forward sum and the backward pass.
//   bazel build -c opt //bench:embedding_bag_bench && bazel-bin/bench/embedding_bag_bench
#include <string>
#include <vector>

#include "bench/fashion_mnist_images.h"
#include "benchmark/benchmark.h"
#include "data/dataset.h"
#include "model/embedding_bag.h"

namespace pstrain::model {
namespace {

constexpr int kBatch = 32;
constexpr int kBatches = 100;

const data::Dataset& Images() { return bench::FashionMnistTrainImages("embedding_bag_bench"); }

EmbeddingBag Layer() {
  EmbeddingBagSpec spec;
  spec.name = "pixels";
  spec.vocabulary = 3136;
  spec.dim = 32;
  spec.combiner = model::EmbeddingBagSpec::Combiner::kSum;
  spec.ids_from = "pixel_buckets:4";
  return *EmbeddingBag::Create(spec, 784);
}

const float* Batch(int64_t i) {
  return Images().features.data() + (i % kBatches) * kBatch * Images().example_dim;
}

void BM_MakeBags(benchmark::State& state) {
  const EmbeddingBag bag = Layer();
  Bags bags;
  int64_t i = 0, ids = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(bag.MakeBags(Batch(i++), nullptr, 0, kBatch, &bags));
    ids += static_cast<int64_t>(bags.slot.size());
    benchmark::DoNotOptimize(bags.slot.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["ids_per_batch"] = static_cast<double>(ids) / state.iterations();
}
BENCHMARK(BM_MakeBags);

void BM_ForwardBackward(benchmark::State& state) {
  const EmbeddingBag bag = Layer();
  std::vector<Bags> bags(kBatches);
  for (int b = 0; b < kBatches; ++b) (void)bag.MakeBags(Batch(b), nullptr, 0, kBatch, &bags[b]);
  std::vector<float> rows(3136 * 32, 0.01f), out(kBatch * 32), d_out(kBatch * 32, 0.001f),
      grads(3136 * 32);
  int64_t i = 0;
  for (auto _ : state) {
    const Bags& b = bags[i++ % kBatches];
    bag.Forward(b, rows.data(), out.data());
    bag.Backward(b, d_out.data(), grads.data());
    benchmark::DoNotOptimize(grads.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_ForwardBackward);

}  // namespace
}  // namespace pstrain::model
