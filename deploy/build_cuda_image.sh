#!/bin/bash
# Builds the GPU image (deploy/Dockerfile.cuda) from the CUDA toolkit on this
# host: `bazel build -c opt //:pstrain` with CUDA enabled (nvcc, cudart and
# cuBLAS under $CUDA_PATH or /usr/local/cuda), then a build context holding
# only the binary, its CUDA plugin, the shared libraries `ldd` says they
# load (glibc aside),
# the configs and the Fashion-MNIST files. No GPU is needed to build.
#
#   deploy/build_cuda_image.sh [IMAGE]     (default localhost:5000/pstrain:VERSION-cuda)
#
# ENGINE: docker (default) or podman; ENGINE_FLAGS: its global options.
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${ENGINE:-docker}
read -r -a FLAGS <<< "${ENGINE_FLAGS:-}"
bazel build -c opt //:pstrain
version=$(bazel-bin/pstrain --version)
if ! grep -q '^cuda: compiled in' <<< "$version"; then
  echo "build_cuda_image: this pstrain has no CUDA (${version##*cuda: }); install the" \
       "toolkit or set CUDA_PATH" >&2
  exit 1
fi
IMAGE=${1:-localhost:5000/pstrain:$(head -n 1 <<< "$version" | awk '{print $2}')-cuda}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
stage=$ctx/stage
install -D -m 0755 bazel-bin/pstrain "$stage/usr/local/bin/pstrain"
mkdir -p "$stage/usr/local/lib/pstrain" "$stage/etc/ld.so.conf.d" "$stage/usr/share/datasets" \
  "$stage/opt/pstrain"
# The CUDA plugin (model/cuda_plugin.h), where pstrain looks for it, and
# what it loads (cudart, cuBLAS).
install -m 0644 bazel-bin/libpstrain_cuda.so "$stage/usr/local/lib/pstrain/"
deploy/copy_libs.sh "$stage/usr/local/lib/pstrain" bazel-bin/pstrain bazel-bin/libpstrain_cuda.so
echo /usr/local/lib/pstrain > "$stage/etc/ld.so.conf.d/pstrain.conf"
cp -a /usr/share/datasets/fashion-mnist "$stage/usr/share/datasets/"
cp -a configs "$stage/opt/pstrain/configs"
cp deploy/Dockerfile.cuda "$ctx/Dockerfile"
"$ENGINE" "${FLAGS[@]}" build -t "$IMAGE" "$ctx"
size=$("$ENGINE" "${FLAGS[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "build_cuda_image: $IMAGE is $(( size / 1000000 )) MB"
