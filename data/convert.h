// Converters into TFRecord files of tf.train.Example, the format every
// TensorFlow input pipeline reads: so that the demo runs from TFRecords as
// a user's job does, and the two paths can be compared example for example.
// Stateless; thread-safe for distinct outputs.
#ifndef PSTRAIN_DATA_CONVERT_H_
#define PSTRAIN_DATA_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "data/tfrecord.h"

namespace pstrain::data {

// The Example of one IDX example: "image" a float_list of its values
// (pixels / 255, the exact floats LoadMnistFormat gives) and "label" an
// int64_list of one class.
std::string IdxExample(const float* image, int64_t dim, int32_t label);

struct ConvertedSplit {
  std::vector<std::string> files;
  std::vector<int64_t> examples;  // per file
};

// Writes the MNIST IDX data set in `dir` to `out` (created if needed) as
// train-SSSSS-of-NNNNN.tfrecord[.gz] (`files` files, file i holding
// examples [i * n / files, (i + 1) * n / files) in order) and
// test-00000-of-00001.tfrecord[.gz]; ".gz" and GZIP when `compression` is
// GZIP. Each file is written whole or not at all (TfRecordWriter).
// InvalidArgument for files outside 1..min(n, 99999) or `out` naming `dir`;
// FailedPrecondition when `out` holds train-* or test-* files already;
// errors of LoadMnistFormat and the writer.
absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsTfRecord(const std::string& dir,
                                                               const std::string& out, int files,
                                                               Compression compression);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_CONVERT_H_
