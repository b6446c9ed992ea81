#include "bench/fashion_mnist_images.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pstrain::bench {

const data::Dataset& FashionMnistTrainImages(const char* program) {
  static const data::Dataset* images = [program] {
    const char* dir = std::getenv("PSTRAIN_DATA_DIR");
    auto d = data::LoadMnistFormat(dir != nullptr ? dir : "/usr/share/datasets/fashion-mnist",
                                   data::Split::kTrain);
    if (!d.ok()) {
      std::fprintf(stderr, "%s: %s\n", program, std::string(d.status().message()).c_str());
      std::exit(1);
    }
    return new data::Dataset(*std::move(d));
  }();
  return *images;
}

}  // namespace pstrain::bench
