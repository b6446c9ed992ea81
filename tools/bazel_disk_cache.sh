#!/usr/bin/env bash
# Keeps the Bazel disk cache that .bazelrc names (~/.cache/pstrain-bazel-disk)
# true to the machine and bounded in size. Every checkout and every output
# base (the g++ tree, the clang trees of tests/run_tests.sh) shares it, so
# a fresh clone compiles only what no earlier build on this machine did.
#
# Bazel keys an action by its inputs, but the system's compilers, headers
# and libraries are not declared inputs (third_party/system): after an
# upgrade of any of them the cached objects would be stale. So the cache
# holds a fingerprint of the toolchain (the versions of the packages the
# build reads, nvcc's and Bazel's), and a cache of another fingerprint is
# emptied before use. Then entries unused for 14 days go, and, while the
# cache is over PSTRAIN_DISK_CACHE_MAX_MB (default 8192), the least
# recently used. A cache only ever saves work: an emptied one rebuilds.
#
#   tools/bazel_disk_cache.sh                 # check and trim; prints one line
#   tools/bazel_disk_cache.sh --fingerprint   # the same, the line on stderr, then
#                                             # the toolchain's fingerprint on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
# Bazel reads `~` as the user's home from the password database, not as
# $HOME: the same here, so that a run with HOME elsewhere keeps this cache.
home=$(getent passwd "$(id -u)" | cut -d: -f6)
dir=$(sed -n 's|^build --disk_cache=~/|'"${home:-$HOME}"'/|p' .bazelrc)
[[ -n $dir ]] || { echo "bazel_disk_cache: .bazelrc names no --disk_cache under ~/" >&2; exit 1; }
max_mb=${PSTRAIN_DISK_CACHE_MAX_MB:-8192}
# Every package deploy/install_deps.sh installs that the compile or link
# reads, as dpkg knows them, and the compilers' own words.
fingerprint() {
  dpkg-query -W -f='${Package} ${Version}\n' bazel-bootstrap g++ gcc clang libclang-rt-14-dev \
    libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libgrpc++-dev libabsl-dev \
    libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libdnnl-dev zlib1g-dev libpng-dev \
    libturbojpeg0-dev libssl-dev libonnx-dev nlohmann-json3-dev libc6-dev 2>/dev/null | sort
  local nvcc=${CUDA_PATH:-/usr/local/cuda}/bin/nvcc
  if [[ -x $nvcc ]]; then "$nvcc" --version | tail -2; else echo "no nvcc"; fi
}
mkdir -p "$dir"
want=$(fingerprint | md5sum | cut -c1-32)
have=$(cat "$dir/FINGERPRINT" 2>/dev/null || true)
if [[ $have != "$want" ]]; then
  [[ -z $have ]] || echo "bazel_disk_cache: the toolchain changed since $dir was filled: emptied"
  find "$dir" -mindepth 1 -delete
  echo "$want" >"$dir/FINGERPRINT"
fi
# Entries are files under ac/ and cas/; Bazel reads them by name, and one
# removed is an action run again.
find "$dir/ac" "$dir/cas" -type f -atime +14 -delete 2>/dev/null || true
used_mb=$(du -sm "$dir" | cut -f1)
if ((used_mb > max_mb)); then
  # Oldest access first, until a quarter under the bound.
  find "$dir/ac" "$dir/cas" -type f -printf '%A@ %s %p\n' | sort -n |
    awk -v drop=$(((used_mb - max_mb * 3 / 4) * 1048576)) \
      '{ if (done < drop) { print $3; done += $2 } }' |
    xargs -r rm -f
  used_mb=$(du -sm "$dir" | cut -f1)
fi
line="bazel_disk_cache: $dir, ${used_mb} MB (bound ${max_mb} MB)"
if [[ ${1:-} == --fingerprint ]]; then
  echo "$line" >&2
  cat "$dir/FINGERPRINT"
else
  echo "$line"
fi
