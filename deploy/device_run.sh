#!/usr/bin/env bash
# The device check, run from a bundle folder (deploy/device_bundle.sh) on a
# GPU machine with the NVIDIA driver and CUDA 13's runtime and cuBLAS, and
# nothing else of ours. Every result goes to $OUT, in six files:
#   summary.txt  one line per step: PASS/FAIL, its time, what it showed
#   devices.txt  nvidia-smi's devices and driver
#   tests.log    the CUDA tests (CPU-vs-CUDA steps of the MLP, the Fashion
#                CNN, the text CNN and the sigmoid model; the device probe)
#   bench.log    pstrain bench: the guide MLP and the Fashion CNN, local,
#                clusters and the CUDA rows at batch 32, 256 and 1024, each
#                against the cuBLAS-only time of its step's products; the
#                text CNN's CUDA rows alone (--cuda_only: no corpus needed)
#   local.log    train --local of the guide MLP on CUDA at batch 1024
#   cluster.log  1 CPU PS + 2 workers (CUDA where usable) on Fashion-MNIST
# Each step has a time limit; together they come to 455 s. QUICK=1 (the run on a machine without a device, in the test
# command): short runs and --device=auto everywhere. Exits 1 when a step
# failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
quick=${QUICK:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# CUDA's libraries: where the system has them, else a toolkit's or Python's.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import nvidia, os; [print(os.path.join(p, s, "lib")) for p in nvidia.__path__ for s in ("cublas", "cuda_runtime")]' 2>/dev/null); do
  [[ -d $d ]] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PSTRAIN_CUDA_PLUGIN="$here/bin/libpstrain_cuda.so"
pstrain="$here/bin/pstrain"
data="$here/data/fashion-mnist"
status=0
# step NAME LOG SECONDS COMMAND...: runs it within SECONDS, its output
# appended to $OUT/LOG, and one line in summary.txt.
step() {
  local name=$1 log=$2 limit=$3 start=$SECONDS rc
  shift 3
  echo "== $name: $*" >>"$OUT/$log"
  timeout "$limit" "$@" >>"$OUT/$log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "PASS $name ($((SECONDS - start)) s)" | tee -a "$OUT/summary.txt"
  else
    echo "FAIL $name (exit $rc$([[ $rc -eq 124 ]] && echo ": over ${limit} s"), $((SECONDS - start)) s; see $log)" |
      tee -a "$OUT/summary.txt"
    status=1
  fi
}
{ nvidia-smi -L && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } \
  >"$OUT/devices.txt" 2>&1 || echo "no nvidia-smi: no GPU here" >>"$OUT/devices.txt"
step version summary.txt 10 "$pstrain" --version
for t in cuda_device_test backend_test; do
  step "$t" tests.log 45 "$here/bin/$t"
done
echo "tests: $(grep -c '^\[       OK \]' "$OUT/tests.log") passed, $(grep -c '^\[  SKIPPED \] .*(' "$OUT/tests.log") skipped, $(grep -c '^\[  FAILED  \] .*(' "$OUT/tests.log") failed" |
  tee -a "$OUT/summary.txt"
# The bench's steps per run: the CNN's CPU runs take 10x the MLP's.
declare -A steps=([fashion_mnist_mlp]=2000 [fashion_mnist_cnn]=300)
local_steps=0 device=cuda
[[ $quick == 1 ]] && steps=([fashion_mnist_mlp]=30 [fashion_mnist_cnn]=30) local_steps=100 device=auto
for config in fashion_mnist_mlp fashion_mnist_cnn; do
  step "bench $config" bench.log 90 "$pstrain" bench --model_config="$here/configs/$config.pbtxt" \
    --data_dir="$data" --steps="${steps[$config]}" --repeat=1 --output_dir="$work/bench-$config"
done
step "bench text_cnn --cuda_only" bench.log 40 "$pstrain" bench \
  --model_config="$here/configs/text_cnn.pbtxt" --cuda_only
grep -E '^(== bench|  (train --local|1 PS|cuda))' "$OUT/bench.log" |
  sed -E 's/^== (bench [^:]*):.*/\1:/; s/^ +/bench:   /' >>"$OUT/summary.txt"
step "train --local, batch 1024, --device=$device" local.log 45 "$pstrain" train --local \
  --model_config="$here/configs/fashion_mnist_mlp.pbtxt" --data_dir="$data" --batch_size=1024 \
  --epochs=2 --max_steps="$local_steps" --device="$device" --output_dir="$work/local"
grep -E '^(test accuracy|training throughput)' "$OUT/local.log" | sed 's/^/local: /' >>"$OUT/summary.txt"
step "1 CPU PS + 2 workers" cluster.log 90 "$pstrain" launch --ps 1 --workers 2 \
  --model_config="$here/configs/fashion_mnist_mlp.pbtxt" --data_dir="$data" \
  --max_steps="$local_steps" --output_dir="$work/cluster"
grep -E 'computes on|^(test accuracy|training throughput)' "$OUT/cluster.log" |
  sed 's/^/cluster: /' >>"$OUT/summary.txt"
echo "device check: $([[ $status -eq 0 ]] && echo ok || echo FAILED) in ${SECONDS} s" | tee -a "$OUT/summary.txt"
exit $status
