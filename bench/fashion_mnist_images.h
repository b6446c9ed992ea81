// The Fashion-MNIST training split the benchmarks run on, loaded once:
// /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist), or
// the directory $PSTRAIN_DATA_DIR names. A benchmark that cannot read it
// exits 1, saying why, with `program` before the message.
#ifndef PSTRAIN_BENCH_FASHION_MNIST_IMAGES_H_
#define PSTRAIN_BENCH_FASHION_MNIST_IMAGES_H_

#include "data/dataset.h"

namespace pstrain::bench {

const data::Dataset& FashionMnistTrainImages(const char* program);

}  // namespace pstrain::bench

#endif  // PSTRAIN_BENCH_FASHION_MNIST_IMAGES_H_
