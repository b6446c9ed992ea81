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
#include "data/input.h"
#include "data/tfrecord.h"

namespace pstrain::data {

// How `pstrain data to-tfrecord` stores an IDX image in its Example, with
// "label" an int64_list of one class beside it:
//   kFloats  "image": a float_list of its values (pixels / 255, the exact
//            floats LoadMnistFormat gives)
//   kRaw     "image_raw": one bytes_list value of its bytes, with "height",
//            "width" and "depth" int64s: TensorFlow's MNIST
//            convert_to_records layout (decode: "raw_uint8")
//   kPng     "image": one bytes_list value, a height x width x 1 PNG image:
//            TensorFlow Datasets' layout (decode: "png")
//   kJpeg    the same as a grayscale JPEG image (quality 95; decode: "jpeg"),
//            as TensorFlow Datasets stores photos
enum class ImageEncoding { kFloats, kRaw, kPng, kJpeg };

// "floats", "raw", "png", "jpeg"; InvalidArgument naming anything else.
absl::StatusOr<ImageEncoding> ParseImageEncoding(absl::string_view name);

// The Example of one IDX image of height x width bytes. Errors of
// EncodePng and EncodeJpeg.
absl::StatusOr<std::string> IdxExample(const uint8_t* pixels, int64_t height, int64_t width,
                                       int32_t label, ImageEncoding encoding);

struct ConvertedSplit {
  std::vector<std::string> files;
  std::vector<int64_t> examples;  // per file
  int64_t skipped = 0;            // bad records passed over (skip_bad_records)
};

// Writes the MNIST IDX data set in `dir` to `out` (created if needed) as
// train-SSSSS-of-NNNNN.tfrecord[.gz] (`files` files, file i holding
// examples [i * n / files, (i + 1) * n / files) in order) and
// test-00000-of-00001.tfrecord[.gz]; ".gz" and GZIP when `compression` is
// GZIP, each image stored as `encoding` says. Each file is written whole
// or not at all (TfRecordWriter). InvalidArgument for files outside
// 1..min(n, 99999) or `out` naming `dir`; FailedPrecondition when `out`
// holds train-* or test-* files already; errors of LoadMnistFormat and the
// writer.
absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsTfRecord(
    const std::string& dir, const std::string& out, int files, Compression compression,
    ImageEncoding encoding = ImageEncoding::kFloats);

// Writes the MNIST IDX data set in `dir` to `out` (created if needed) as
// CSV files in the layout of Kaggle's Fashion-MNIST CSV: a header
// "label,pixel1,...,pixelD" and one row per example, its label and its D
// pixels as integers 0..255; fashion-mnist_train.csv and
// fashion-mnist_test.csv. Each file is written whole or not at all.
// Errors of LoadMnistFormat and of writing; FailedPrecondition when a file
// is there already.
absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsCsv(const std::string& dir,
                                                          const std::string& out);

// Writes the CSV or TSV splits `input` names (REQUIRES: format kCsv;
// relative patterns and vocabulary files under `data_dir`) to `out` as
// TFRecord files of tf.train.Example: train-SSSSS-of-NNNNN.tfrecord[.gz],
// one per training file in their sorted order (so a job shards them as it
// shards the CSV files), and test-... likewise. Each row becomes an Example
// with one feature per spec feature holding the row's values
// (CsvFormat::Values: a float_list, an int64_list, or a bytes_list of the
// cells or of a text column's words) and the label as an int64_list, so the
// same features with format "tfrecord" decode each Example as the CSV row
// decodes. A bad row stops the conversion (DataLoss "FILE line N: what")
// unless input.skip_bad_records: then it is logged and counted. Errors as
// WriteIdxAsTfRecord's for `out`, and the input's.
absl::StatusOr<std::vector<ConvertedSplit>> WriteCsvAsTfRecord(const std::string& data_dir,
                                                               const InputSpec& input,
                                                               const std::string& out,
                                                               Compression compression);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_CONVERT_H_
