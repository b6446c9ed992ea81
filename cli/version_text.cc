#include "absl/strings/str_cat.h"
#include "cli/build_info.h"
#include "model/blas_kernels.h"
#include "model/cuda_device.h"

namespace pstrain {

std::string VersionText() {
  return absl::StrCat("pstrain ", kPstrainVersion, "\ncommit: ", BuildCommit(), " (", BuildTree(),
                      " tree)\nbuild: ", BuildMode(), "\n", model::DescribeCuda(), "\n",
                      model::DescribeBlas(), "\n");
}

}  // namespace pstrain
