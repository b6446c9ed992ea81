#!/usr/bin/env bash
# Installs what is missing, builds pstrain, and trains Fashion-MNIST on a
# local cluster (2 PS, 2 workers, a chief training beside them, an evaluator scoring checkpoints
# as they are written) on 127.0.0.1. Extra arguments go
# to `pstrain launch` (for example --epochs=3 or --workers=3).
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install_deps.sh
tools/bazel_disk_cache.sh >/dev/null  # the build cache, true to this machine's toolchain
echo "quickstart: building (the first build takes a few minutes)"
bazel build //:pstrain >/dev/null 2>bazel-build.log || { cat bazel-build.log; exit 1; }
rm -f bazel-build.log
# A fresh run each time: a job resumes from checkpoints it finds in its
# output directory, so the quickstart clears its own.
rm -rf ./output/quickstart
exec bazel-bin/pstrain launch --ps 2 --workers 2 --evaluator --checkpoint_secs=1 \
  --epochs 2 --output_dir ./output/quickstart "$@"
