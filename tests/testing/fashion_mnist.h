// Copies of the Fashion-MNIST files (Debian's dataset-fashion-mnist) for
// tests that need the real data damaged.
#ifndef PSTRAIN_TESTS_TESTING_FASHION_MNIST_H_
#define PSTRAIN_TESTS_TESTING_FASHION_MNIST_H_

#include <string>

#include "absl/status/statusor.h"

namespace pstrain::testing {

// Where dataset-fashion-mnist puts the four files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Copies the four files into `dir` (created when missing) and cuts the
// training images short, to a third of their compressed bytes, as a copy
// interrupted on its way to shared storage leaves them. Returns that file's
// path.
absl::StatusOr<std::string> CopyFashionMnistCutShort(const std::string& dir);

}  // namespace pstrain::testing

#endif  // PSTRAIN_TESTS_TESTING_FASHION_MNIST_H_
