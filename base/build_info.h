// What a binary reports about itself: the release, the commit it was built
// from, and how it was compiled. The commit comes from the build's
// workspace status (tools/workspace_status.sh): "unknown" when the sources
// were not a git checkout. `pstrain --version` adds CUDA and BLAS
// (cli/build_info.h); the per-role binaries say these lines alone.
#ifndef PSTRAIN_BASE_BUILD_INFO_H_
#define PSTRAIN_BASE_BUILD_INFO_H_

namespace pstrain {

// The release of this source tree.
inline constexpr char kPstrainVersion[] = "0.1.0";

// The git commit the binary was built from (40 hex digits, or "unknown").
const char* BuildCommit();
// "clean", "modified" (the tree had uncommitted changes) or "unknown".
const char* BuildTree();
// Bazel's compilation mode: "opt", "fastbuild" or "dbg".
const char* BuildMode();

}  // namespace pstrain

#endif  // PSTRAIN_BASE_BUILD_INFO_H_
