#include "model/compute_threads.h"

#include <cblas.h>

#include <atomic>

// libgomp's (oneDNN's OpenMP runtime), declared here: clang's own omp.h
// belongs to another runtime.
extern "C" {
void omp_set_num_threads(int threads);
int omp_get_num_procs(void);
}

namespace pstrain::model {

namespace {

std::atomic<int> compute_threads{0};  // 0: not set

}  // namespace

void SetComputeThreads(int threads) {
  compute_threads.store(threads);
  openblas_set_num_threads(threads);
}

int ComputeThreads() {
  const int threads = compute_threads.load();
  return threads > 0 ? threads : omp_get_num_procs();
}

void ApplyComputeThreads() { omp_set_num_threads(ComputeThreads()); }

void SetBlasThreadsFor(bool uses_onednn) {
  openblas_set_num_threads(uses_onednn ? 1 : ComputeThreads());
}

}  // namespace pstrain::model
