// Google Benchmark of copying a just-received block into memory that is not
// in the cache, as the PS client does with each MiB-sized pull: memcpy
// against StreamCopy (base/stream_copy.h), on one core.
//   bazel build -c opt //bench:copy_bench && bazel-bin/bench/copy_bench
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "base/stream_copy.h"

namespace pstrain {
namespace {

// Untimed before each copy: 64 MiB are written elsewhere (twice the
// machine's L3), which leaves the destination in memory only, and then the
// source is written, as a socket read leaves a message in the cache.
template <bool kStream>
void BM_CopyIntoColdMemory(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> src(n, 1), dst(n, 2), other(size_t{64} << 20, 3);
  char fill = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < other.size(); i += 64) other[i] = fill;
    std::memset(src.data(), ++fill, n);
    state.ResumeTiming();
    if (kStream) {
      StreamCopy(dst.data(), src.data(), n);
    } else {
      std::memcpy(dst.data(), src.data(), n);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// A fixed count of copies: the untimed eviction takes ten times as long as
// a copy, and the default run-until-0.5-s-timed would take minutes.
void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 20)->Arg(4 << 20)->Iterations(300)->Unit(benchmark::kMicrosecond);
}
BENCHMARK_TEMPLATE(BM_CopyIntoColdMemory, false)->Name("memcpy")->Apply(Sizes);
BENCHMARK_TEMPLATE(BM_CopyIntoColdMemory, true)->Name("StreamCopy")->Apply(Sizes);

}  // namespace
}  // namespace pstrain
