"""cuda_library: compiles .cu sources with nvcc when the toolkit was found.

cuda_library(name, srcs, hdrs, deps) yields a cc_library named `name`. With
CUDA detected (see cuda_configure.bzl) each .cu file becomes a position
independent object compiled by nvcc for sm_80 and sm_90 (A100, H100) plus PTX,
linked against cudart and cuBLAS. Without CUDA the macro yields the
`cpu_fallback` sources instead, so callers always link.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH")

def cuda_library(name, srcs, hdrs = [], deps = [], cpu_fallback = [], **kwargs):
    if not CUDA_ENABLED:
        native.cc_library(
            name = name,
            srcs = cpu_fallback,
            hdrs = hdrs,
            # Empty here; named so that dependents compile alike in both builds.
            deps = deps + ["@local_cuda//:cuda_link"],
            # Linked whole into the plugin (//:libpstrain_cuda.so), which
            # calls none of it itself.
            alwayslink = True,
            **kwargs
        )
        return
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".pic.o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = ("{nvcc} -c -std=c++17 -O2 -Xcompiler -fPIC -I. " +
                   "-gencode arch=compute_80,code=sm_80 " +
                   "-gencode arch=compute_90,code=[sm_90,compute_90] " +
                   "$(location {src}) -o $@").format(nvcc = CUDA_PATH + "/bin/nvcc", src = src),
            # Outside the sandbox as before, but cached like any compile
            # (the disk cache; tools/bazel_disk_cache.sh keys it by nvcc's
            # version): "local" would compile every .cu in every clone.
            tags = ["no-sandbox"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        # The libraries only: nvcc has the headers; C++ that depends on this
        # is compiled the same whether CUDA was found or not.
        deps = deps + ["@local_cuda//:cuda_link"],
        alwayslink = True,
        **kwargs
    )
