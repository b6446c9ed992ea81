#include "tests/testing/fashion_mnist.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace pstrain::testing {

absl::StatusOr<std::string> CopyFashionMnistCutShort(const std::string& dir) {
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  std::error_code error;
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    const std::string from = absl::StrCat(kFashionMnistDir, "/", name);
    if (!std::filesystem::copy_file(from, absl::StrCat(dir, "/", name),
                                    std::filesystem::copy_options::overwrite_existing, error)) {
      return absl::InternalError(absl::StrCat("copying ", from, ": ", error.message()));
    }
  }
  const std::string images = dir + "/train-images-idx3-ubyte.gz";
  const auto size = std::filesystem::file_size(images, error);
  if (!error) std::filesystem::resize_file(images, size / 3, error);
  if (error) return absl::InternalError(absl::StrCat("cutting ", images, ": ", error.message()));
  return images;
}

}  // namespace pstrain::testing
