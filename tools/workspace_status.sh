#!/bin/sh
# Build stamp for `pstrain --version` (.bazelrc: --workspace_status_command).
# Keys starting with STABLE_ are read by //base:build_info; when they change,
# only that file and the binaries that link it are rebuilt.
# Without a checkout (an image build: .dockerignore leaves .git out), the
# builder may name the commit in PSTRAIN_COMMIT.
# PSTRAIN_STAMP=0 (the test command's builds) names no commit: a new commit
# then relinks nothing, and the tests of unchanged binaries stay cached.
if [ "${PSTRAIN_STAMP:-1}" = 0 ]; then
  commit=unknown
else
  commit=$(git rev-parse HEAD 2>/dev/null) || commit=${PSTRAIN_COMMIT:-unknown}
fi
if [ "$commit" = unknown ] || ! git rev-parse HEAD >/dev/null 2>&1; then
  tree=unknown
elif git diff --quiet HEAD -- 2>/dev/null; then
  tree=clean
else
  tree=modified
fi
echo "STABLE_PSTRAIN_COMMIT $commit"
echo "STABLE_PSTRAIN_TREE $tree"
