#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs every test: the Bazel
# cluster and unit tests (counted per test case, tests/count_results.py) and
# the build checks below. The last line is "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."

deploy/install_deps.sh --test || { echo "0 passed, 1 failed"; exit 1; }
# The disk cache every tree below shares (.bazelrc), true to this
# machine's toolchain and bounded; the toolchain's fingerprint, for the
# kept checks below.
disk_cache_fingerprint=$(tools/bazel_disk_cache.sh --fingerprint) ||
  { echo "0 passed, 1 failed"; exit 1; }
# Binaries built here name no commit (`--version` says "commit: unknown";
# tools/workspace_status.sh): a new commit alone relinks nothing, so a
# test whose inputs did not change keeps its cached result.
export PSTRAIN_STAMP=0

passed=0
failed=0
skipped=0
# report NAME START RC LOG: counts a check that began at START (in
# $SECONDS) and exited RC, with the end of LOG when it failed.
report() {
  local name=$1 start=$2 rc=$3 log=$4
  if [[ $rc -eq 0 ]]; then
    echo "PASS: $name ($((SECONDS - start)) s)"
    passed=$((passed + 1))
  else
    echo "FAIL: $name ($((SECONDS - start)) s)"
    sed 's/^/    /' "$log" | tail -40
    failed=$((failed + 1))
  fi
  rm -f "$log"
  return $((rc != 0))
}
check() {  # check NAME COMMAND...: one counted test run outside Bazel
  local name=$1
  shift
  local start=$SECONDS rc=0
  "$@" >"/tmp/pstrain-check-$$.log" 2>&1 || rc=$?
  report "$name" "$start" "$rc" "/tmp/pstrain-check-$$.log"
}
# start_check NAME COMMAND...: check, but run in the background at the
# lowest CPU priority (and the lowest of the best-effort I/O ones), so that
# the phases in front of it keep the CPU first (they still take about a
# quarter longer beside it: the cores share caches and memory bandwidth);
# finish_check waits for it and counts it. One at a time.
start_check() {
  background_name=$1
  shift
  background_start=$SECONDS
  background_log="/tmp/pstrain-background-$$.log"
  nice -n 19 ionice -c2 -n7 "$@" >"$background_log" 2>&1 &
  background_pid=$!
}
finish_check() {
  local rc=0
  wait "$background_pid" || rc=$?
  background_pid=
  report "$background_name" "$background_start" "$rc" "$background_log"
}
# inputs_digest WORDS FILE...: one digest of WORDS (what else the check
# depends on, or ""), the files' contents (with their base names, not their
# paths, which differ from checkout to checkout) and every shared library
# they load (Bazel's per-library objects included), with the toolchain's
# fingerprint (tools/bazel_disk_cache.sh).
inputs_digest() {
  local words=$1
  shift
  { echo "$disk_cache_fingerprint $words"
    for f in "$@"; do echo "$(sha256sum <"$f" | cut -c1-64) ${f##*/}"; done
    ldd "$@" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u | xargs -r sha256sum | cut -c1-64 |
      sort
  } | sha256sum | cut -c1-64
}
# cached_check NAME DIGEST COMMAND...: check, but one that passed before
# on inputs of the same DIGEST (inputs_digest over every file the check
# reads) is not run again, as Bazel keeps a test's result while its
# inputs are unchanged; its PASS line says so. Failures are never kept.
check_marks="${HOME:-/tmp}/.cache/pstrain-checks"
cached_check() {
  local name=$1 digest=$2
  shift 2
  if [[ -f $check_marks/$digest ]]; then
    echo "PASS: $name (cached: its inputs are those of the run at $(cat "$check_marks/$digest"))"
    passed=$((passed + 1))
    return 0
  fi
  check "$name" "$@" || return 1
  mkdir -p "$check_marks"
  date -u +%FT%TZ >"$check_marks/$digest"
  find "$check_marks" -type f -mtime +30 -delete
}

# Each test target compiles in one tree only. The unit tests beside the
# code (the packages below) compile with clang, and run under
# AddressSanitizer + UndefinedBehaviorSanitizer in the checks further down;
# g++ builds everything else (the libraries, the commands, the benchmarks,
# the fuzz regression tests) and runs the cluster and end-to-end tests
# under tests/ against its -O2 binaries. The checks outside Bazel take
# their binaries from these two trees (the kernel TLS check the clang
# tree's frame_tls_test), never compiling a test again. `bazel test //...`
# still builds and runs everything with g++.
unit_pkgs=(base transport cluster store ps_server worker chief model data evaluator optim
  checkpoint client job train coordinator allreduce exporter)
# With g++ instead: the crash handler's test (AddressSanitizer takes the
# signals it handles), and the device check's two tests (the CUDA cases,
# and the backends they compare), which deploy/device_bundle.sh carries to
# a GPU machine and tests/build_variants.sh runs in the CPU-only build.
gcc_unit_tests="//base:crash_handler_test + //model:backend_test + //model:cuda_device_test"
unit_tests="(tests(set($(printf '//%s/... ' "${unit_pkgs[@]}"))) except ($gcc_unit_tests))"
results_dir=$(mktemp -d)
background_pid=
trap 'rm -rf "$results_dir"; [[ -z $background_pid ]] || kill "$background_pid" 2>/dev/null' EXIT
bazel query "//... except attr(tags, '\bmanual\b', //...) except $unit_tests" >"$results_dir/gcc_targets" 2>"$results_dir/query.log" &&
  bazel query "tests(//...) except $unit_tests" >"$results_dir/gcc_labels" 2>>"$results_dir/query.log" &&
  bazel query "$unit_tests" >"$results_dir/unit_labels" 2>>"$results_dir/query.log" ||
  { cat "$results_dir/query.log"; echo "0 passed, 1 failed"; exit 1; }

echo "== bazel build (g++: all but the unit tests)"
phase_start=$SECONDS
if ! bazel build --target_pattern_file="$results_dir/gcc_targets"; then
  echo "0 passed, 1 failed"
  exit 1
fi
echo "== bazel build took $((SECONDS - phase_start)) s"

# counted_tests NAME LABELS BAZEL_ARGS...: one `bazel test` run whose cases
# are counted from the reports its build events name (tests/count_results.py):
# a target that crashed, timed out or did not build counts as failed, by
# name, and no report of an earlier run is read.
counted_tests() {
  local name=$1 labels=$2
  shift 2
  local events="$results_dir/$name.json" counts="$results_dir/$name.counts"
  "$@" --keep_going --build_event_json_file="$events"
  local bazel_rc=$?
  /usr/bin/python3 tests/count_results.py "$events" "$labels" >"$counts" ||
    echo "FAIL: counting the test reports of $name" >>"$counts"
  grep '^FAIL: ' "$counts"
  local p f s
  read -r p f s < <(tail -1 "$counts" | grep -E '^[0-9]+ [0-9]+ [0-9]+$' || echo "0 1 0")
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  if [[ $bazel_rc -ne 0 && $f -eq 0 ]]; then
    echo "FAIL: $name: bazel test exited $bazel_rc but no test case failed"
    failed=$((failed + 1))
  fi
}

# clang compiles the tree once, in an output base of its own, for four
# checks (.bazelrc's asan configuration): -Wthread-safety -Werror checks the
# lock annotations g++ ignores; the unit tests run under AddressSanitizer +
# UndefinedBehaviorSanitizer (leaks included), counted case by case; the
# kernel TLS check boots its frame_tls_test; and the fuzz targets below,
# built in the same command, link the same objects. One Bazel server
# serves all four, then stops. The packages are named: with a
# second output base, //... would wander into the first one's bazel-*
# convenience links. No links are made for these builds. The cluster tests
# (tests/), the benchmarks but ps_load's code (the one with lock
# annotations; its library, not the binary, which would bring the pstrain
# binary it runs), the commands (cli/, launcher/, experiment/: flags, files
# and child processes, run end to end by the cluster tests) and the fuzz
# regression tests (g++ runs them; the fuzz targets themselves are built
# here) are left out: no annotations of their own.
# It needs nothing from the g++ tree, so it compiles while the cluster
# tests run, in the CPU time they leave idle (a third of it: they wait on
# sockets, timers and each other). Its server starts afresh, so that it and
# its compilers inherit the low priority.
san_base="${HOME:-/tmp}/.cache/pstrain-asan-$(pwd | md5sum | cut -c1-8)"
fuzz_targets=$(fuzz/run.sh --labels)
bazel --output_base="$san_base" shutdown >/dev/null 2>&1 || true
start_check "clang -Wthread-safety -Werror build (with ASan + UBSan; begun beside the cluster tests)" \
  bazel --output_base="$san_base" build --config=asan --symlink_prefix=/ -- \
  $(printf '//%s/... ' "${unit_pkgs[@]}") //proto/... //bench:ps_load_main $fuzz_targets

echo "== bazel test (g++: cluster, end-to-end and command tests)"
phase_start=$SECONDS
counted_tests gcc "$results_dir/gcc_labels" \
  bazel test --target_pattern_file="$results_dir/gcc_labels"
echo "== bazel test took $((SECONDS - phase_start)) s"

echo "== build checks"
check "test-case counting (tests/count_results_test.py)" \
  /usr/bin/python3 tests/count_results_test.py
# The g++ tree's ps_bench, for the kernel TLS check after the clang build
# (the CPU-only build below relinks what depends on CUDA).
gcc_bin=$(bazel info bazel-bin 2>/dev/null)
cp "$gcc_bin/bench/ps_bench" "$results_dir/ps_bench"
# The device check's folder (deploy/device_bundle.sh), from the build above,
# run here: no device, so its CUDA cases skip and every task trains on the
# CPU. Before the CPU-only build below, which would change the plugin.
bundle_dir=$(mktemp -d)
bundle_inputs=$(inputs_digest "" "$gcc_bin/pstrain" "$gcc_bin/libpstrain_cuda.so" \
  "$gcc_bin/model/backend_test" "$gcc_bin/model/cuda_device_test" deploy/device_bundle.sh \
  deploy/device_run.sh deploy/copy_libs.sh $(git ls-files configs))
cached_check "device-check bundle, built and run without a device" "$bundle_inputs" \
  bash -c "PACK=0 deploy/device_bundle.sh '$bundle_dir/bundle' -c fastbuild &&
    OUT='$bundle_dir/out' QUICK=1 '$bundle_dir/bundle/run.sh' &&
    grep -q '^device check: ok' '$bundle_dir/out/summary.txt'"
rm -rf "$bundle_dir"
check "CUDA detection and CPU-only build" tests/build_variants.sh
check "package dependencies point one way (tests/check_layers.sh)" tests/check_layers.sh
# The clang tree, begun beside the cluster tests above.
finish_check
echo "== unit tests under ASan + UBSan"
phase_start=$SECONDS
counted_tests asan "$results_dir/unit_labels" \
  bazel --output_base="$san_base" test --config=asan --symlink_prefix=/ \
  --target_pattern_file="$results_dir/unit_labels"
echo "== unit tests under ASan + UBSan took $((SECONDS - phase_start)) s"
# Frames inside TLS with the kernel sealing the records (kTLS), on Debian's
# own kernel booted under QEMU: a host kernel without the tls module (as
# some VMs' are) leaves every other test on OpenSSL's side of the frame
# socket. The clang tree's frame_tls_test (ASan + UBSan in the guest too)
# and the g++ tree's ps_bench; about a minute.
kernel_tls_dir=$(mktemp -d)
frame_tls_test="$san_base/execroot/pstrain/bazel-out/k8-fastbuild/bin/transport/frame_tls_test"
kernel_tls_inputs=$(inputs_digest "$(tools/kernel_tls_check.sh --kernel-package 2>&1)" \
  "$frame_tls_test" "$results_dir/ps_bench" tools/kernel_tls_check.sh deploy/make_certs.sh \
  /bin/busybox /usr/bin/qemu-system-x86_64 /bin/bash /usr/bin/openssl)
cached_check "kernel TLS on Debian's kernel under QEMU (tools/kernel_tls_check.sh)" \
  "$kernel_tls_inputs" env FRAME_TLS_TEST="$frame_tls_test" PS_BENCH="$results_dir/ps_bench" \
  tools/kernel_tls_check.sh "$kernel_tls_dir"
rm -rf "$kernel_tls_dir"
# Every fuzz target (libFuzzer, ASan + UBSan) for 3 s from its corpus, as
# built above (the corpora also run as regression tests in //fuzz;
# `fuzz/run.sh 600` for long runs); it stops the clang tree's server.
check "fuzz targets, 3 s each" fuzz/run.sh 3
# The PS's concurrency tests (shard store, wait list, ParallelFor, the
# checkpoint writer's SerialWorker, the all-reduce ring's sender, the
# collective store's exchange thread, a TLS frame socket's reader and writer
# each in its own records at once, or taking turns at OpenSSL's connection
# object for ChaCha20-Poly1305: threads sharing state without gRPC in
# between)
# under ThreadSanitizer. Debian's
# Abseil is annotated for it by //base/testing:tsan_absl; tests whose
# threads meet inside gRPC are not run here: gRPC's core is not instrumented
# and its hand-offs would read as races.
tsan_base="${HOME:-/tmp}/.cache/pstrain-tsan-$(pwd | md5sum | cut -c1-8)"
check "PS concurrency tests under TSan" \
  bazel --output_base="$tsan_base" test --config=tsan --symlink_prefix=/ -- \
  //store:shard_store_test //store:wait_list_test //store:push_hold_test //base:parallel_for_test \
  //base:serial_worker_test //transport:ring_test //client:collective_store_test \
  //transport:frame_tls_test
bazel --output_base="$tsan_base" shutdown >/dev/null 2>&1 || true

echo "== everything took ${SECONDS} s"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[[ $failed -eq 0 ]]
