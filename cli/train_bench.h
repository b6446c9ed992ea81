// `pstrain bench`: how fast the CPU backend trains, against what the
// hardware allows. In one run, alternating, `--repeat` times:
//   - OpenBLAS's sgemm rate on one thread at the shapes one training step
//     of the model multiplies (forward, weight gradients, input gradients),
//     and from it the limit in examples/s (sgemm rate / sgemm FLOP per
//     example);
//   - `train --local` on one BLAS thread for --steps steps: examples/s and
//     its ratio to the limit, and the sgemm GFLOP/s that rate implies (where
//     --device puts it on CUDA, its rate alone: the cuda rows below give
//     that device's ceiling);
//   - clusters started as `pstrain launch` does (real processes on
//     loopback, one BLAS thread per task): 1 PS + 1 worker async, 1 PS + 2
//     workers async and sync, each for --steps steps, with examples/s and
//     the ratio to the local run of the same round; their tensor bytes go
//     through shared memory (the default on one host), and once more, for
//     1 PS + 1 worker async, in the gRPC frames (--noshared_memory);
//   - where a CUDA device is usable (--device=cuda:N picks one; 0 by
//     default), forward and backward on it at batch 32, 256 and 1024:
//     examples/s, the share of step time spent in copies, and the
//     cuBLAS-only time of the same step's sgemm calls, the step's ceiling
//     on that device (model::CudaGemmSeconds), with the step's ratio to it.
// Prints each round, then medians (of figures and of per-round ratios).
// --cuda_only prints the CUDA rows alone: no data is read and nothing is
// launched, so a model whose data is not at hand can be timed on a device.
#ifndef PSTRAIN_CLI_TRAIN_BENCH_H_
#define PSTRAIN_CLI_TRAIN_BENCH_H_

#include <string>

#include "base/cli_args.h"

namespace pstrain {

// Flags: --steps=N (1000), --repeat=R (3), --output_dir (a fresh directory
// under /tmp), --cuda_only, --certs=DIR (a directory deploy/make_certs.sh made: adds
// 1 PS + 1 worker with the job's mutual TLS and token, frames over TCP
// inside TLS and in gRPC's TLS stream), and the job flags (e.g.
// --model_config=configs/fashion_mnist_mlp.pbtxt). Returns the exit code.
int TrainBenchMain(const std::string& self_path, CliArgs& args);

}  // namespace pstrain

#endif  // PSTRAIN_CLI_TRAIN_BENCH_H_
