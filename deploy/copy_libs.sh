#!/usr/bin/env bash
# Copies the shared libraries that the given binaries load (the closure
# `ldd` names, links followed) into DEST, glibc's own libraries aside:
# every target system has those, and they must match its loader. With
# --no-cuda, CUDA's runtime and cuBLAS are left out too, for a machine whose
# driver brings its own. Used by the images (deploy/Dockerfile,
# deploy/build_cuda_image.sh) and the device check (deploy/device_bundle.sh).
#
#   deploy/copy_libs.sh [--no-cuda] DEST BINARY...
set -euo pipefail
skip='/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64)\.so'
if [[ ${1:-} == --no-cuda ]]; then
  skip="$skip|/lib(cudart|cublas|cublasLt)\.so"
  shift
fi
if [[ $# -lt 2 ]]; then
  echo "usage: deploy/copy_libs.sh [--no-cuda] DEST BINARY..." >&2
  exit 2
fi
dest=$1
shift
[[ -d $dest ]] || { echo "copy_libs: $dest is not a directory" >&2; exit 2; }
# ldd names a library it cannot find as "=> not found": that binary would not start.
if missing=$(ldd "$@" | grep 'not found'); then
  echo "copy_libs: libraries not found: $missing" >&2
  exit 1
fi
ldd "$@" | awk '$3 ~ /^\// {print $3}' | sort -u | { grep -v -E "$skip" || true; } |
  xargs -r -I{} cp -L {} "$dest/"
