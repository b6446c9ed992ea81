// What `pstrain --version` reports about the binary: base/build_info.h's
// release, commit and build, and the machine's CUDA and BLAS as it sees
// them.
#ifndef PSTRAIN_CLI_BUILD_INFO_H_
#define PSTRAIN_CLI_BUILD_INFO_H_

#include <string>

#include "base/build_info.h"

namespace pstrain {

// The lines `pstrain --version` prints: version, commit, build, and
// whether CUDA is compiled in (with the devices it sees).
std::string VersionText();

}  // namespace pstrain

#endif  // PSTRAIN_CLI_BUILD_INFO_H_
