#!/usr/bin/env bash
# Runs one case of each Google Benchmark binary for a moment and checks
# that it reports a measured time (JSON output): the benchmarks that no
# other test runs still start and measure what they name.
set -euo pipefail
cd "${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-pstrain}"
status=0
# run BINARY FILTER: one case of BINARY (a regular expression for
# --benchmark_filter); fails unless it ran with a positive time.
run() {
  local bin=$1 filter=$2 json
  if ! json=$("bench/$bin" --benchmark_filter="$filter" --benchmark_min_time=0.01 \
      --benchmark_format=json 2>"$TEST_TMPDIR/$bin.err"); then
    echo "FAIL: $bin exited non-zero:"; cat "$TEST_TMPDIR/$bin.err"; status=1; return
  fi
  if ! /usr/bin/python3 -c '
import json, sys
runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") != "aggregate"]
assert runs, "no case matched"
for b in runs:
    assert b["iterations"] > 0 and b["real_time"] > 0, b
    print("%s: %s: %.4g %s per iteration over %d iterations" % (
        sys.argv[1], b["name"], b["real_time"], b["time_unit"], b["iterations"]))
' "$bin" <<<"$json"; then
    echo "FAIL: $bin ($filter) reported no measured case"; status=1
  fi
}
run bfloat16_bench 'BM_FloatsToBfloat16/262144'
run copy_bench 'StreamCopy'
run embedding_bag_bench 'BM_MakeBags'
run image_model_bench 'mobilenet_v2_a035_32x32_b64_onednn'
run input_bench 'BM_Decode$'
run network_bench 'BM_Step/fashion_mnist_mlp'
run optimizer_bench 'BM_Apply/adam'
run tls_record_bench 'BM_SealFrame/4096'
exit $status
