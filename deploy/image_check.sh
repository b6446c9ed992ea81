#!/bin/bash
# Builds the one image (deploy/Dockerfile) and runs a job from it: a PS, a
# chief that trains, a worker and an evaluator, each a container of the same
# image on the host's loopback with its own TF_CONFIG, sharing one output
# directory as /data/output. Passes when every container exits 0 and the
# evaluator's score of the final checkpoint equals the chief's.
#
#   deploy/image_check.sh [OUTPUT_DIR]
#
# ENGINE: docker (default) or podman (on Debian 12: `apt-get install -y
# podman runc`; runc for the flags below). ENGINE_FLAGS: the engine's own
# global options, e.g. for rootful podman where crun cannot manage cgroups:
#   ENGINE=podman ENGINE_FLAGS="--runtime=runc --cgroup-manager=cgroupfs"
# Where the host forbids containers to set resource limits ("error setting
# rlimit ... operation not permitted"), give podman a containers.conf
# without default limits:
#   printf '[containers]\ndefault_ulimits = []\n' > /tmp/pc.conf
#   CONTAINERS_CONF=/tmp/pc.conf ENGINE=podman ... deploy/image_check.sh
# IMAGE (default pstrain:check); SKIP_BUILD=1 runs an image already built;
# BASE_PORT (default 7200): the tasks use BASE_PORT..BASE_PORT+3.
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${ENGINE:-docker}
read -r -a FLAGS <<< "${ENGINE_FLAGS:-}"
IMAGE=${IMAGE:-pstrain:check}
PORT=${BASE_PORT:-7200}
OUT=$(realpath -m "${1:-output/image_check}")
mkdir -p "$OUT"
rm -rf "${OUT:?}"/*
# The tasks run as the image's user, not as the caller.
chmod 0777 "$OUT"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  start=$(date +%s)
  "$ENGINE" "${FLAGS[@]}" build -f deploy/Dockerfile -t "$IMAGE" \
    --build-arg PSTRAIN_COMMIT="$(git rev-parse HEAD 2>/dev/null || echo unknown)" . \
    > "$OUT/build.log" 2>&1 ||
    { echo "image_check: the build failed; see $OUT/build.log" >&2; exit 1; }
  echo "image_check: built $IMAGE in $(( $(date +%s) - start )) s"
fi
size=$("$ENGINE" "${FLAGS[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "image_check: $IMAGE is $(( size / 1000000 )) MB"

cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$PORT\"],\"ps\":[\"127.0.0.1:$((PORT + 1))\"],"
cluster+="\"worker\":[\"127.0.0.1:$((PORT + 2))\"],\"evaluator\":[\"127.0.0.1:$((PORT + 3))\"]}"
declare -A pids
run() {  # NAME TYPE INDEX [FLAGS...]
  local name=$1 type=$2 index=$3
  shift 3
  "$ENGINE" "${FLAGS[@]}" run --rm --network=host -v "$OUT:/data/output" \
    -e TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":$index},\"environment\":\"cloud\"}" \
    "$IMAGE" "$@" > "$OUT/$name.log" 2>&1 &
  pids[$name]=$!
}
start=$(date +%s)
args=(--epochs=1 --eval_poll_secs=1 --eval_wait_secs=300)
run ps-0 ps 0 "${args[@]}"
run chief-0 chief 0 "${args[@]}"
run worker-0 worker 0 "${args[@]}"
run evaluator-0 evaluator 0 "${args[@]}"
failed=0
for name in ps-0 chief-0 worker-0 evaluator-0; do
  code=0
  wait "${pids[$name]}" || code=$?
  echo "image_check: $name exited $code"
  [[ $code == 0 ]] || failed=1
done
echo "image_check: the job took $(( $(date +%s) - start )) s; logs under $OUT"
chief=$(grep -o 'test accuracy: [0-9.]*' "$OUT/chief-0.log" | tail -n 1 || true)
eval_line=$(grep -o 'eval at step [0-9]*: loss [0-9.]* - accuracy [0-9.]*' "$OUT/evaluator-0.log" |
            tail -n 1 || true)
echo "image_check: chief: ${chief:-none}; evaluator: ${eval_line:-none}"
waited=$(grep -o 'the evaluator scored the final checkpoint.*' "$OUT/chief-0.log" || true)
echo "image_check: chief: ${waited:-did not wait for the evaluator}"
if [[ $failed != 0 || -z "$chief" || -z "$waited" || "${chief##* }" != "${eval_line##* }" ]]; then
  echo "image_check: FAILED" >&2
  exit 1
fi
echo "image_check: passed"
