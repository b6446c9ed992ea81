#!/usr/bin/env bash
# A short run of ps_bench's push_pull, alternating and pipelined scenarios
# (real PS and echo servers as processes): it must finish, time calls on
# both sides and print their ratio. The figures themselves belong in
# docs/benchmarks/history.md, from full runs; this checks the bench still
# measures what it says.
set -euo pipefail
out=$(bench/ps_bench --scenario=push_pull --ps=1 --clients=1 --bytes=65536 --seconds=0.1 --repeat=1)
echo "$out"
# The PS with its frames over TCP and in gRPC, each round, and the echo.
grep -Eq "^push_pull ps tcp +1 +1 +64 KiB +[1-9][0-9]* .* 2$" <<<"$out"
grep -Eq "^push_pull ps grpc +1 +1 +64 KiB +[1-9][0-9]* .* 1$" <<<"$out"
grep -Eq "^push_pull echo +1 +1 +64 KiB +[1-9][0-9]* " <<<"$out"
grep -Eq "median of 1: ps over tcp  [1-9][0-9]* calls/s = .* GB/s each way; [0-9.]+x the echo" <<<"$out"
grep -Eq "median of 1: ps over grpc [1-9][0-9]* calls/s = .* GB/s each way; [0-9.]+x the echo" <<<"$out"
out=$(bench/ps_bench --scenario=alternating --bytes=65536,4096 --seconds=0.1 --repeat=2)
echo "$out"
[[ $(grep -Ec "^alternating +64 KiB: [1-9][0-9]* calls each; median ms ps [0-9.]+ \([0-9]+ calls/s\), echo [0-9.]+ \([0-9]+ calls/s\); ps/echo [0-9.]+x$" <<<"$out") == 2 ]]
[[ $(grep -Ec "^  median of 2: ps/echo [0-9.]+x, alternating call by call$" <<<"$out") == 2 ]]
# Pipelined pushes over each transport (the bench fails, naming both, when
# its frames went another way than asked): one and two clients take turns,
# a median for each.
for t in tcp grpc shm; do
  out=$(bench/ps_bench --scenario=pipelined --transport=$t --bytes=1048576 --seconds=0.1 --repeat=2)
  echo "$out"
  [[ $(grep -Ec "^pipelined x4 $t +1 +1 +1 MiB +[1-9][0-9]* " <<<"$out") == 2 ]]
  [[ $(grep -Ec "^pipelined x4 $t +1 +2 +1 MiB +[1-9][0-9]* " <<<"$out") == 2 ]]
  grep -Eq "^  median of 2: pipelined over $t, 4 in flight, 1 client: [0-9]+\.[0-9]{3} GB/s one way$" <<<"$out"
  grep -Eq "^  median of 2: pipelined over $t, 4 in flight, 2 clients: [0-9]+\.[0-9]{3} GB/s one way$" <<<"$out"
done
# With the job's certificates (--certs, as deploy/make_certs.sh makes them)
# push_pull adds the frame port inside TLS, and the pipelined pushes take it.
certs="${TEST_TMPDIR:-$(mktemp -d)}/certs"
bash deploy/make_certs.sh "$certs" >/dev/null
out=$(bench/ps_bench --scenario=push_pull --ps=1 --clients=1 --bytes=65536 --seconds=0.1 \
  --repeat=1 --certs="$certs")
echo "$out"
grep -Eq "^push_pull ps tcp +1 +1 +64 KiB +[1-9][0-9]* .* 2$" <<<"$out"
grep -Eq "^push_pull ps tls +1 +1 +64 KiB +[1-9][0-9]* .* 2$" <<<"$out"
grep -Eq "median of 1: ps over tls  [1-9][0-9]* calls/s = .* GB/s each way; [0-9.]+x the echo" <<<"$out"
out=$(bench/ps_bench --scenario=pipelined --transport=tls --certs="$certs" --bytes=1048576 \
  --seconds=0.1 --repeat=1)
echo "$out"
grep -Eq "^pipelined x4 tls +1 +1 +1 MiB +[1-9][0-9]* " <<<"$out"
if bench/ps_bench --scenario=pipelined --transport=tls 2>err.txt; then exit 1; fi
grep -q "tls needs --certs" err.txt
# A bad flag is refused with the usage line.
if bench/ps_bench --scenario=nonesuch 2>err.txt; then exit 1; fi
grep -q "usage: ps_bench" err.txt
