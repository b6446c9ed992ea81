// The CUDA backend as a plugin: the kernels (model/cuda_device_kernels.h,
// model/cuda_mlp_kernels.h, model/cuda_net_kernels.h) live in the shared
// object libpstrain_cuda.so, linked against cudart and cuBLAS, and this
// library defines the same C functions in the binary by forwarding to it.
// So only a process that asks for CUDA (a training or scoring task, `pstrain
// describe`) loads those libraries; the PS, the chief's duties and the
// tools start without them, and where they are missing.
//
// The plugin is looked for, once per process, at $PSTRAIN_CUDA_PLUGIN when
// set, else beside the running binary (bazel-bin/pstrain), in ../lib/pstrain/
// from it (an image's layout), or in the binary's Bazel runfiles (the
// per-role binaries). When it cannot be loaded, every kernel call fails with
// the reason (CUDA's code 35, "insufficient driver", its closest meaning),
// which callers treat as no usable device. Thread-safe.
#ifndef PSTRAIN_MODEL_CUDA_PLUGIN_H_
#define PSTRAIN_MODEL_CUDA_PLUGIN_H_

#include <string>

namespace pstrain::model {

inline constexpr char kCudaPluginName[] = "libpstrain_cuda.so";

// Loads the plugin on first use. True when it was loaded.
bool CudaPluginLoaded();
// The file it was loaded from, or why none was: "no libpstrain_cuda.so at
// /usr/local/bin/libpstrain_cuda.so or ...".
const std::string& CudaPluginOrigin();

}  // namespace pstrain::model

#endif  // PSTRAIN_MODEL_CUDA_PLUGIN_H_
