"""Repository rule that detects the CUDA toolkit.

Looks for nvcc, cudart and cuBLAS under $CUDA_PATH, or /usr/local/cuda when
CUDA_PATH is unset. The generated repository always has:
  //:defs.bzl  with CUDA_ENABLED (bool) and CUDA_PATH (string)
  //:cuda      a cc_library of the headers, linking cudart and cuBLAS (empty
               when disabled)
  //:cuda_link the same without headers (empty when disabled)
  //:config.txt a one-line human-readable verdict
Where any piece is missing the build is CPU-only; nothing fails.
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    missing = []
    for rel in ["bin/nvcc", "include/cuda_runtime.h", "include/cublas_v2.h",
                "lib64/libcudart.so", "lib64/libcublas.so"]:
        if not ctx.path(root + "/" + rel).exists:
            missing.append(rel)
    enabled = len(missing) == 0
    if enabled:
        ctx.symlink(root + "/include", "include")
        ctx.symlink(root + "/lib64", "lib64")
        ctx.symlink(root + "/bin/nvcc", "nvcc")
        build = """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp"]),
    includes = ["include"],
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcublas", "-lcudart"],
)
# Only the libraries, for code whose CUDA sources nvcc compiles: C++ that
# depends on it is compiled the same whether CUDA was found or not, so
# switching between the two builds recompiles only the CUDA pieces.
cc_library(
    name = "cuda_link",
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcublas", "-lcudart"],
)
exports_files(["config.txt", "nvcc"])
""".format(root = root)
        verdict = "CUDA enabled: toolkit at %s" % root
    else:
        build = """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda")
cc_library(name = "cuda_link")
exports_files(["config.txt"])
"""
        verdict = "CUDA disabled: %s lacks %s" % (root, ", ".join(missing))
    ctx.file("BUILD", build)
    ctx.file("config.txt", verdict + "\n")
    ctx.file("defs.bzl", "CUDA_ENABLED = %s\nCUDA_PATH = %r\n" % (enabled, root))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
