#!/usr/bin/env bash
# Checks that package dependencies point one way: each package's libraries
# and binaries (tests and test-only helpers aside) may depend directly only on the
# packages listed for it below, all of them lower. From the bottom:
#   base/       utilities: status, logging, JSON, files, processes, clocks,
#               threads, CRCs, byte payloads, summaries
#   cluster/    what a job's tasks agree on: TF_CONFIG, placement,
#               consistency modes, checkpoint layout, optimizer specs
#   transport/  how they talk: gRPC servers and status, TLS and tokens,
#               call limits, wire frames, frame sockets, shared memory
#   optim/ checkpoint/ data/ model/   the math, the files, the input
#   store/      the PS's state (no transport); client/ reaches it
#   job/ train/ coordinator/          a job's settings, its step loop, the
#               chief's parts
#   ps_server/ worker/ chief/ evaluator/   the roles
#   exporter/   a trained model as .npz and ONNX
#   launcher/   a whole cluster of child processes on loopback
#   experiment/ which setup trains faster: the experiment runner (over
#               launcher/) and the PS planner (its cost model, its
#               measurement through client/ and of the ring in transport/)
# Roles never depend on one another or on cli/; cli/ is the only package
# that knows every role, and holds the commands only (flags in, text
# out); bench/, fuzz/ and tests/ sit on top.
# Exits 1 naming each dependency that points the wrong way.
set -uo pipefail
cd "$(dirname "$0")/.."

declare -A ALLOWED=(
  [proto]=""
  [base]="proto"
  [cluster]="base proto"
  [transport]="base cluster proto"
  [optim]="base cluster proto"
  [checkpoint]="base cluster proto"
  [data]="base cluster proto"
  [model]="base cluster proto data"
  [store]="base cluster proto optim checkpoint"
  [client]="base cluster transport proto store"
  [job]="base cluster transport proto data model"
  [train]="base cluster proto optim checkpoint store data model client job"
  [coordinator]="base cluster transport proto checkpoint data model client job train"
  [ps_server]="base cluster transport proto optim checkpoint store job"
  [allreduce]="base cluster transport proto data model client job train"
  [worker]="base cluster transport proto data model client job train coordinator allreduce"
  [chief]="base cluster transport proto data model client job train coordinator allreduce"
  [evaluator]="base cluster transport proto optim checkpoint data model job train"
  [exporter]="base cluster model"
  [launcher]="base cluster"
  [experiment]="base cluster transport client launcher"
)

bad=0
for pkg in $(printf '%s\n' "${!ALLOWED[@]}" | sort); do
  if ! deps=$(bazel query --noshow_progress \
      "deps(kind('cc_library|cc_binary', attr(testonly, 0, //$pkg/...)), 1)" \
      --output package 2>/tmp/check_layers.$$); then
    cat /tmp/check_layers.$$
    rm -f /tmp/check_layers.$$
    exit 1
  fi
  rm -f /tmp/check_layers.$$
  for dep in $(echo "$deps" | grep -v '^@' | sed 's|/.*||' | sort -u); do
    [[ -z "$dep" || "$dep" == "$pkg" || "$dep" == "third_party" ]] && continue
    if [[ " ${ALLOWED[$pkg]} " != *" $dep "* ]]; then
      echo "//$pkg depends on //$dep, which it may not (allowed: ${ALLOWED[$pkg]:-nothing}):"
      bazel query --noshow_progress \
        "somepath(kind('cc_library|cc_binary', attr(testonly, 0, //$pkg/...)), //$dep/...)" \
        2>/dev/null | sed 's/^/    /'
      bad=1
    fi
  done
done
# The PS's store and its parts know nothing of gRPC: gradients arrive as a
# Payload, in-place answers leave as HeldBytes (store/shard_store.h).
for target in //store:shard_store //base:payload; do
  path=$(bazel query --noshow_progress "somepath($target, @system_libs//:grpc)" 2>/dev/null)
  if [[ -n "$path" ]]; then
    echo "$target reaches gRPC, which it may not:"
    echo "$path" | sed 's/^/    /'
    bad=1
  fi
done
[[ $bad -eq 0 ]] && echo "every package depends only on the packages below it; the PS store knows nothing of gRPC"
exit $bad
