// What `pstrain --version` reports about the binary itself: the release,
// the commit it was built from, and how it was compiled. The commit comes
// from the build's workspace status (tools/workspace_status.sh): "unknown"
// when the sources were not a git checkout.
#ifndef PSTRAIN_CLI_BUILD_INFO_H_
#define PSTRAIN_CLI_BUILD_INFO_H_

#include <string>

namespace pstrain {

// The release of this source tree.
inline constexpr char kPstrainVersion[] = "0.1.0";

// The git commit the binary was built from (40 hex digits, or "unknown").
const char* BuildCommit();
// "clean", "modified" (the tree had uncommitted changes) or "unknown".
const char* BuildTree();
// Bazel's compilation mode: "opt", "fastbuild" or "dbg".
const char* BuildMode();

// The lines `pstrain --version` prints: version, commit, build, and
// whether CUDA is compiled in (with the devices it sees).
std::string VersionText();

}  // namespace pstrain

#endif  // PSTRAIN_CLI_BUILD_INFO_H_
