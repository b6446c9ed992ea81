#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer (clang, ASan + UBSan, coverage) and
# runs each for SECONDS (default 10) from its checked-in corpus; new inputs
# go to a scratch directory, not into the repository; as many targets run at
# once as there are cores. Prints executions and coverage per target. A
# crash fails the run and leaves its input under the scratch directory: fix
# it and add the input to fuzz/corpus/<target>/.
#
#   fuzz/run.sh            # 10 s each (the test command runs 3 s each)
#   fuzz/run.sh 600        # the long runs
#   fuzz/run.sh --labels   # the targets' Bazel labels, one a line
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-10}
targets=(tf_config model_config idx_reader tfrecord example csv checkpoint ps_request png jpeg)
# The output base of the test command's ASan build, whose objects the fuzz
# configuration shares (.bazelrc).
base="${HOME:-/tmp}/.cache/pstrain-asan-$(pwd | md5sum | cut -c1-8)"
labels=()
for t in "${targets[@]}"; do labels+=("//fuzz:${t}_fuzz"); done
# --labels: the targets' labels, for a build that makes them beside others.
if [[ $seconds == --labels ]]; then printf '%s\n' "${labels[@]}"; exit 0; fi
bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ -- "${labels[@]}" \
  2>&1 | grep -v "Cannot export local symbol" | tail -3
bin="$base/execroot/pstrain/bazel-out/k8-fastbuild/bin/fuzz"
bazel --output_base="$base" shutdown >/dev/null 2>&1 || true
scratch=$(mktemp -d /tmp/pstrain-fuzz-XXXXXX)
# One target per core at a time (each fuzzer runs on one thread).
jobs=$(nproc 2>/dev/null || echo 1)
# run_one TARGET: fuzzes it and writes its summary line to $scratch/TARGET.result;
# fails when the target crashed.
run_one() {
  local t=$1 result status=0 runs cov
  mkdir -p "$scratch/$t"
  if (cd "$scratch" && "$bin/${t}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$scratch/$t-" "$scratch/$t" "$root/fuzz/corpus/$t" \
        >"$scratch/$t.log" 2>&1); then
    result="ok"
  else
    result="FAILED (see $scratch/$t.log)"
    status=1
    # What failed, and the input as base64, for the log of a run that is gone.
    grep -E "^(==[0-9]+==|SUMMARY|Base64|    #[0-9] )|runtime error" "$scratch/$t.log" | head -20 \
      | sed "s/^/    $t: /" >"$scratch/$t.failure" || true
  fi
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$scratch/$t.log" | tail -1 || true)
  echo "fuzz ${t}: ${result}, ${runs} executions in ${seconds}s, ${cov:-no coverage line}" \
    >"$scratch/$t.result"
  return $status
}
status=0
pids=()
for t in "${targets[@]}"; do
  if (( ${#pids[@]} >= jobs )); then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
  run_one "$t" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in "${targets[@]}"; do
  cat "$scratch/$t.result"
  [[ -f "$scratch/$t.failure" ]] && cat "$scratch/$t.failure"
done
[[ $status -eq 0 ]] && rm -rf "$scratch"
exit $status
