// Google Benchmark of the bfloat16 wire conversions (base/bfloat16.h) on
// one core, against a memcpy of the same float bytes: what narrowing a
// push and widening a pull cost per byte of float32 tensor.
//   bazel build -c opt //bench:bfloat16_bench && bazel-bin/bench/bfloat16_bench
#include <cmath>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "base/bfloat16.h"

namespace pstrain {
namespace {

std::vector<float> Values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.001f * static_cast<float>(i));
  return v;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> in = Values(n), out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), 4 * n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(4 * n));
}

void BM_FloatsToBfloat16(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> in = Values(n);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    FloatsToBfloat16(in.data(), static_cast<int64_t>(n), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(4 * n));
}

// In place, as the PS narrows the values it pulled and a worker widens
// what it received into its parameters.
void BM_Bfloat16ToFloatsInPlace(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> in = Values(n), buf(n);
  std::vector<uint16_t> narrow(n);
  FloatsToBfloat16(in.data(), static_cast<int64_t>(n), narrow.data());
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(buf.data(), narrow.data(), 2 * n);
    state.ResumeTiming();
    Bfloat16ToFloats(buf.data(), static_cast<int64_t>(n), buf.data());
    benchmark::DoNotOptimize(buf.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(4 * n));
}

// 1 MiB and 4 MiB of floats: the guide MLP's tensors and ps_bench's.
BENCHMARK(BM_Memcpy)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FloatsToBfloat16)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Bfloat16ToFloatsInPlace)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pstrain
