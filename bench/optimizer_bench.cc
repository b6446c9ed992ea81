// Google Benchmark of the PS optimizers' update loops on one core: the
// per-push cost a PS pays for each float of a dense slice.
//   bazel build -c opt //bench:optimizer_bench && bazel-bin/bench/optimizer_bench
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/optimizer_spec.h"
#include "optim/optimizer.h"

namespace pstrain::ps {
namespace {

void BM_Apply(benchmark::State& state, const char* name) {
  OptimizerSpec spec;
  spec.name = name;
  spec.learning_rate = 1e-3f;
  std::unique_ptr<optim::Optimizer> opt = *optim::CreateOptimizer(spec);
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> values(n, 0.5f), grad(n, 0.01f);
  std::vector<std::vector<float>> slot_store(opt->num_slots());
  std::vector<absl::Span<float>> slots;
  for (int k = 0; k < opt->num_slots(); ++k) {
    slot_store[k].assign(n, opt->initial_slot_value(k));
    slots.push_back(absl::MakeSpan(slot_store[k]));
  }
  int64_t t = 0;
  for (auto _ : state) {
    opt->Apply(absl::MakeSpan(values), absl::MakeConstSpan(grad), absl::MakeConstSpan(slots),
               ++t);
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 4);
}

// 200,704 floats: dense_0/kernel of the Fashion-MNIST MLP (784 x 256).
BENCHMARK_CAPTURE(BM_Apply, sgd, "sgd")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, momentum, "momentum")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, adagrad, "adagrad")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, adam, "adam")->Arg(200704);

}  // namespace
}  // namespace pstrain::ps
