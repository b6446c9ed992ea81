// How many threads the CPU's training arithmetic uses: oneDNN's (OpenMP's,
// model/onednn_*.h) for convolutions, batch normalizations and
// activations, and OpenBLAS's for sgemm (dense layers; convolutions on the
// reference kernels). One setting for the process, from --blas_threads
// (one per core unless a task's flags say).
//
// OpenMP keeps the count per thread and oneDNN fixes a primitive's when it
// builds it, so the network applies it on the thread that builds its
// layers and on the one that computes (ApplyComputeThreads in model::Network's
// constructor and before each pass). OpenBLAS
// keeps one count per process: a network whose heavy layers run on oneDNN
// leaves OpenBLAS one thread (it then multiplies only a small dense head,
// and its idle threads spin-wait beside oneDNN's: measured 10-20% slower
// training of MobileNetV2 on 2 cores with two).
#ifndef PSTRAIN_MODEL_COMPUTE_THREADS_H_
#define PSTRAIN_MODEL_COMPUTE_THREADS_H_

namespace pstrain::model {

// REQUIRES: threads >= 1. Sets OpenBLAS's count at once.
void SetComputeThreads(int threads);
// The setting: SetComputeThreads's, or the cores OpenMP sees.
int ComputeThreads();
// On the calling thread: OpenMP's count is the setting.
void ApplyComputeThreads();
// A network with oneDNN layers is about to train: OpenBLAS down to one
// thread (see above); without any, OpenBLAS gets the setting.
void SetBlasThreadsFor(bool uses_onednn);

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_COMPUTE_THREADS_H_
