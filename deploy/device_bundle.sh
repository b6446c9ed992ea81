#!/usr/bin/env bash
# Builds the folder that a lent GPU machine runs from alone (it has the
# NVIDIA driver and CUDA 13's libraries, none of our build tools or Debian's
# libraries): bin/ (pstrain, its CUDA plugin, the test binaries with CUDA
# cases), lib/ (the shared libraries they load, glibc and CUDA's own
# aside, as the images collect them), configs/, data/fashion-mnist/ and
# run.sh (deploy/device_run.sh), which writes every result to $OUT. Then
# packs it as DIR.tar.xz, small enough to travel (PACK=0: the folder only).
# Run the folder here first: no device, so the CUDA cases report themselves
# skipped and every task trains on the CPU (QUICK=1: short runs).
#
#   deploy/device_bundle.sh [DIR] [bazel build flags]   (.device_bundle, -c opt)
#   OUT=/tmp/out DIR/run.sh                                (on the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.device_bundle}
shift || true
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(-c opt)
tests=(model/backend_test model/cuda_device_test)  # as //model:backend_test ...
labels=()
for t in "${tests[@]}"; do labels+=("//${t%/*}:${t##*/}"); done
bazel build "${flags[@]}" //:pstrain //:libpstrain_cuda.so "${labels[@]}"
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)
if ! grep -q '^cuda: compiled in' <<<"$("$bin/pstrain" --version)"; then
  echo "device_bundle: this build has no CUDA (no toolkit under \$CUDA_PATH or /usr/local/cuda):" \
    "the bundle would only run on the CPU" >&2
fi
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/data"
install -m 0755 "$bin/pstrain" "$dir/bin/"
install -m 0644 "$bin/libpstrain_cuda.so" "$dir/bin/"
for t in "${tests[@]}"; do install -m 0755 "$bin/$t" "$dir/bin/"; done
# What they load: Debian's libraries and the build's own (a test links
# Bazel's per-library objects, found from where it was built); glibc and
# CUDA's libraries come from the GPU machine, whose driver they must match.
deploy/copy_libs.sh --no-cuda "$dir/lib" "$bin/pstrain" "$bin/libpstrain_cuda.so" "${tests[@]/#/$bin/}"
cp -a configs "$dir/configs"
cp -a "${DATA_DIR:-/usr/share/datasets/fashion-mnist}" "$dir/data/fashion-mnist"
install -m 0755 deploy/device_run.sh "$dir/run.sh"
echo "device_bundle: $dir ($(du -sh "$dir" | cut -f1)): $(ls "$dir/bin" | tr '\n' ' ')"
if [[ ${PACK:-1} == 1 ]]; then
  XZ_OPT=${XZ_OPT:--T0} tar -C "$(dirname "$dir")" -cJf "$dir.tar.xz" "$(basename "$dir")"
  echo "device_bundle: $dir.tar.xz ($(du -sh "$dir.tar.xz" | cut -f1))"
fi
