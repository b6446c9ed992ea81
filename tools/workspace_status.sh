#!/bin/sh
# Build stamp for `pstrain --version` (.bazelrc: --workspace_status_command).
# Keys starting with STABLE_ are read by //cli:build_info; when they change,
# only that file and the binaries that link it are rebuilt.
commit=$(git rev-parse HEAD 2>/dev/null) || commit=unknown
if [ "$commit" = unknown ]; then
  tree=unknown
elif git diff --quiet HEAD -- 2>/dev/null; then
  tree=clean
else
  tree=modified
fi
echo "STABLE_PSTRAIN_COMMIT $commit"
echo "STABLE_PSTRAIN_TREE $tree"
