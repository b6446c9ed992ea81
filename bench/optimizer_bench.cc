// Google Benchmark of the PS optimizers' update loops on one core: the
// per-push cost a PS pays for each float of a dense slice.
//   bazel build -c opt //bench:optimizer_bench && bazel-bin/bench/optimizer_bench
#include <algorithm>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "cluster/optimizer_spec.h"
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
    opt->Apply(absl::MakeSpan(values), absl::MakeConstSpan(grad), absl::MakeConstSpan(slots), ++t);
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * 4);
}

// Adam on slots that have decayed into the denormal range, as they do for
// the weights of pixels that are rarely on: most gradients 0, Adam's first
// moment shrinking by beta1 each step. Run as the PS runs it (ApplyBytes,
// denormals flushed to zero) and in the CPU's default mode (Apply).
template <bool kFlushed>
void BM_AdamDecayedSlots(benchmark::State& state) {
  OptimizerSpec spec;
  spec.name = "adam";
  spec.learning_rate = 1e-3f;
  std::unique_ptr<optim::Optimizer> opt = *optim::CreateOptimizer(spec);
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> values(n, 0.5f), grad(n, 0.0f);
  for (size_t i = 0; i < n; i += 64) grad[i] = 0.01f;  // 1 in 64 pixels on
  std::vector<float> m(n, 1e-39f), v(n, 1e-12f);
  const absl::Span<float> slots[] = {absl::MakeSpan(m), absl::MakeSpan(v)};
  int64_t t = 1000;
  for (auto _ : state) {
    // Keep the slots where many steps of zero gradients leave them.
    state.PauseTiming();
    std::fill(m.begin(), m.end(), 1e-39f);
    state.ResumeTiming();
    if (kFlushed) {
      opt->ApplyBytes(absl::MakeSpan(values), reinterpret_cast<const char*>(grad.data()),
                      absl::MakeConstSpan(slots), ++t);
    } else {
      opt->Apply(absl::MakeSpan(values), absl::MakeConstSpan(grad), absl::MakeConstSpan(slots),
                 ++t);
    }
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK_TEMPLATE(BM_AdamDecayedSlots, true)->Name("adam_decayed_slots/flushed")->Arg(200704);
BENCHMARK_TEMPLATE(BM_AdamDecayedSlots, false)->Name("adam_decayed_slots/default")->Arg(200704);

// 200,704 floats: dense_0/kernel of the Fashion-MNIST MLP (784 x 256).
BENCHMARK_CAPTURE(BM_Apply, sgd, "sgd")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, momentum, "momentum")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, adagrad, "adagrad")->Arg(200704);
BENCHMARK_CAPTURE(BM_Apply, adam, "adam")->Arg(200704);

}  // namespace
}  // namespace pstrain::ps
