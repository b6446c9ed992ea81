#!/usr/bin/env bash
# A short run of allreduce_bench (real member processes on loopback): it
# must finish, name the links each run really used (TCP when told not to
# share memory, shared memory by default on one host), and print each
# process's CPU per all-reduce beside the time. The figures belong in
# docs/benchmarks/history.md, from full runs; this checks the bench
# measures what it says.
set -euo pipefail
out=$(bench/allreduce_bench --processes=3 --bytes=65536 --seconds=0.1 --repeat=2 --noshared_memory)
echo "$out"
grep -Eq "^ring all-reduce: 3 processes on 127.0.0.1 \([0-9]+ cores\), one TCP frame connection to each neighbour, a sender thread beside the caller's \(threads per process: [0-9]+, [0-9]+, [0-9]+\); 65536 bytes of float32 \(float32 on the wire\)" <<<"$out"
grep -Fxq "  process:0's links: to process:1 by tcp, from process:2 by tcp" <<<"$out"
# Each round: the time, both bandwidths, and three processes' CPU.
cpu="CPU per all-reduce [0-9.]+ / [0-9.]+ / [0-9.]+ ms \(all [0-9.]+ ms: [0-9.]+ of [0-9]+ cores busy\)"
[[ $(grep -Ec "^  round [12]: [0-9.]+ ms per all-reduce, algbw [0-9.]+ GB/s, busbw [0-9.]+ GB/s; $cpu$" <<<"$out") == 2 ]]
grep -Eq "^  median of 2: [0-9.]+ ms, algbw [0-9.]+ GB/s, busbw [0-9.]+ GB/s; CPU of all processes [0-9.]+ ms per all-reduce, [0-9.]+ of [0-9]+ cores busy$" <<<"$out"
out=$(bench/allreduce_bench --processes=2 --bytes=65536 --seconds=0.1 --repeat=1 --wire_dtype=bfloat16)
echo "$out"
grep -Fq "(bfloat16 on the wire)" <<<"$out"
grep -Fxq "  process:0's links: to process:1 by shared memory, from process:1 by shared memory" <<<"$out"
# A bad flag is refused, naming it.
if bench/allreduce_bench --wire_dtype=int8 2>err.txt; then exit 1; fi
grep -q "wire_dtype=int8: must be float32 or bfloat16" err.txt
