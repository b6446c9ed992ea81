#!/usr/bin/env bash
# Checks that package dependencies point one way: each package's libraries
# and binaries (tests and test-only helpers aside) may depend directly only on the
# packages listed for it below, all of them lower. Roles (ps_server, worker,
# chief, evaluator) never depend on one another or on cli/; cli/ is the only
# package that knows every role; bench/, fuzz/ and tests/ sit on top.
# Exits 1 naming each dependency that points the wrong way.
set -uo pipefail
cd "$(dirname "$0")/.."

declare -A ALLOWED=(
  [proto]=""
  [common]="proto"
  [optim]="common proto"
  [checkpoint]="common proto"
  [data]="common proto"
  [model]="common proto data"
  [client]="common proto store"
  [job]="common proto data model"
  [train]="common proto optim checkpoint store data model client job"
  [coordinator]="common proto checkpoint data model client job train"
  [store]="common proto optim checkpoint"
  [ps_server]="common proto optim checkpoint store job"
  [worker]="common proto data model client job train coordinator"
  [chief]="common proto data model client job train coordinator"
  [evaluator]="common proto optim checkpoint data model job train"
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
for target in //store:shard_store //common:payload; do
  path=$(bazel query --noshow_progress "somepath($target, @system_libs//:grpc)" 2>/dev/null)
  if [[ -n "$path" ]]; then
    echo "$target reaches gRPC, which it may not:"
    echo "$path" | sed 's/^/    /'
    bad=1
  fi
done
[[ $bad -eq 0 ]] && echo "every package depends only on the packages below it; the PS store knows nothing of gRPC"
exit $bad
