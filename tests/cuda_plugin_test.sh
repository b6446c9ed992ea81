#!/usr/bin/env bash
# The CUDA backend is a plugin (model/cuda_plugin.h): pstrain links neither
# cudart nor cuBLAS, loads libpstrain_cuda.so from beside itself when a
# process asks for CUDA, and where the plugin is missing or is not one it
# says why, and a training task computes on the CPU.
set -euo pipefail
out=$(realpath "${TEST_TMPDIR:-$(mktemp -d)}")
if ldd ./pstrain | grep -E 'libcudart|libcublas'; then
  echo "pstrain links CUDA's libraries itself"
  exit 1
fi
[[ -f ./libpstrain_cuda.so ]]
v=$(./pstrain --version)
echo "$v"
grep -Eq '^cuda: (compiled in|not compiled in \(CPU-only build\))' <<<"$v"
v=$(PSTRAIN_CUDA_PLUGIN=/nonexistent/libpstrain_cuda.so ./pstrain --version)
grep -qx 'cuda: not loaded (no libpstrain_cuda.so at /nonexistent/libpstrain_cuda.so)' <<<"$v"
echo "not a library" >"$out/libpstrain_cuda.so"
v=$(PSTRAIN_CUDA_PLUGIN="$out/libpstrain_cuda.so" ./pstrain --version)
grep -q "^cuda: not loaded (cannot load $out/libpstrain_cuda.so: " <<<"$v"
# A shared object that is not the plugin is named as such.
libz=$(ldd ./pstrain | awk '$1 ~ /^libz\.so/ {print $3}')
if [[ -n "$libz" ]]; then
  v=$(PSTRAIN_CUDA_PLUGIN="$libz" ./pstrain --version)
  grep -q "is not this pstrain's CUDA plugin (it lacks pstrain_cuda_compiled, " <<<"$v"
fi
# A PS, given --num_gpus as every task of a job is, never loads them.
port=$((20000 + RANDOM % 20000))
TF_CONFIG="{\"cluster\": {\"ps\": [\"127.0.0.1:$port\"], \"worker\": [\"127.0.0.1:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}" \
  ./pstrain --num_gpus=1 >"$out/ps.log" 2>&1 &
ps_pid=$!
for _ in $(seq 100); do
  grep -q "serving on" "$out/ps.log" && break
  sleep 0.1
done
cat "$out/ps.log"
grep -q "serving on" "$out/ps.log"
loaded=$(grep -cE 'libcudart|libcublas|libpstrain_cuda' "/proc/$ps_pid/maps" || true)
kill "$ps_pid"
wait "$ps_pid" || true
[[ $loaded -eq 0 ]]
# --device=auto (the default) falls back to the CPU and says why.
PSTRAIN_CUDA_PLUGIN=/nonexistent/libpstrain_cuda.so ./pstrain train --local --hidden=16 \
  --max_steps=20 --output_dir="$out/run" >"$out/train.log" 2>&1
cat "$out/train.log"
grep -q "computing on cpu: .*(device auto: no usable CUDA device: the CUDA plugin is not loaded: no libpstrain_cuda.so at /nonexistent/libpstrain_cuda.so)" "$out/train.log"
grep -q "^test accuracy: " "$out/train.log"
