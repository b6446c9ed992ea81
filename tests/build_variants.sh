#!/usr/bin/env bash
# Proves both builds the CUDA repository rule allows: with the toolkit found
# (where /usr/local/cuda or $CUDA_PATH has one) the CUDA kernels are compiled
# by nvcc into the plugin beside pstrain (libpstrain_cuda.so, model/cuda_plugin.h),
# and pstrain itself links no CUDA library; with the rule pointed at a path
# that does not exist the build is CPU-only and still passes its tests. The default build is
# checked first (the test command has just built it), the CPU-only one last.
# Only the CUDA pieces differ between the two (third_party/cuda: C++ that
# depends on them is compiled alike), so switching costs a few compiles and
# links, not the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

config() { cat "$(bazel info output_base 2>/dev/null)/external/local_cuda/config.txt"; }
describe() {
  TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "ps", "index": 0}}' \
    bazel-bin/pstrain describe | grep '^cuda:'
}

echo "-- default: toolkit detection"
bazel build //:pstrain //model:cuda_device_test
if [[ -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]]; then
  config | tee /dev/stderr | grep -q '^CUDA enabled'
  describe | tee /dev/stderr | grep -q '^cuda: compiled in'
  [[ $(nm -C bazel-bin/libpstrain_cuda.so | grep -c 'SgdKernel') -gt 0 ]]
  if ldd bazel-bin/pstrain | grep -E 'libcudart|libcublas'; then
    echo "pstrain links CUDA's libraries itself" >&2
    exit 1
  fi
else
  config | tee /dev/stderr | grep -q '^CUDA disabled'
fi

echo "-- CPU-only: CUDA_PATH=/nonexistent/cuda"
bazel build --repo_env=CUDA_PATH=/nonexistent/cuda //:pstrain //model:cuda_device_test
config | tee /dev/stderr | grep -q '^CUDA disabled: /nonexistent/cuda lacks bin/nvcc'
describe | tee /dev/stderr | grep -qx 'cuda: not compiled in (CPU-only build)'
# The backend's tests and the CUDA cases, which this build compiles like the
# default one (g++ only: tests/run_tests.sh keeps them out of the clang tree).
bazel test --repo_env=CUDA_PATH=/nonexistent/cuda //model:cuda_device_test //model:backend_test
echo "both builds OK"
