#!/usr/bin/env bash
# A short run of the load test the project ships (bench/ps_load): 8 clients
# for 6 s against the real PS daemon with mutual TLS and a token, one
# request in four malformed or unauthenticated. ps_load itself fails on a
# lost update, an accepted bad request, a failed good call, a dead PS or
# growing memory; this checks its verdict and the lines that carry it.
set -euo pipefail
certs="${TEST_TMPDIR:-/tmp}/load-certs"
bash deploy/make_certs.sh "$certs" >/dev/null
out=$(bench/ps_load --pstrain=./pstrain --clients=8 --seconds=6 --warmup_s=2 --certs="$certs")
echo "$out"
grep -q "mutual TLS and a cluster token" <<<"$out"
grep -q "no update lost" <<<"$out"
grep -q "): flat$" <<<"$out"
grep -q "^ps_load: ok$" <<<"$out"
