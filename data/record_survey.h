// What TFRecord files of tf.train.Example hold, for a user who brings their
// own and must write the `input` block that reads them (`pstrain data
// inspect`): each feature's list kind, how many values an example has and
// their range, and for bytes whether they are PNG images (and their shape)
// or raw bytes of one length; then the input block that would read them.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_RECORD_SURVEY_H_
#define PSTRAIN_DATA_RECORD_SURVEY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/example_parser.h"
#include "data/png_image.h"

namespace pstrain::data {

struct FeatureSurvey {
  std::string name;
  // The list kind it had in the examples that hold it; kNone when they
  // disagree (`mixed_kinds`).
  ListKind kind = ListKind::kNone;
  bool mixed_kinds = false;
  int64_t examples = 0;                    // examples holding it
  int64_t min_values = 0, max_values = 0;  // values per example
  int64_t values = 0;                      // in all examples
  // float_list and int64_list: the smallest and largest value; whether
  // every float was a whole number.
  double min_value = 0, max_value = 0;
  bool integral = true;
  // bytes_list of one value per example: its byte length's range, and
  // whether every one was a PNG image, all of one shape (`png`).
  int64_t min_bytes = 0, max_bytes = 0;
  bool all_png = false;
  bool png_same_shape = false;
  PngShape png;
};

struct RecordSurvey {
  std::vector<std::string> files;
  int64_t records = 0;                  // read (at most the bound asked)
  std::vector<FeatureSurvey> features;  // by name
};

// Reads up to `max_records` records from `files` in order (GZIP for names
// ending in .gz) and surveys their features. Errors: a file that cannot be
// opened or framed (NotFound, DataLoss naming it), or a record that is not
// an Example (InvalidArgument naming file and record).
absl::StatusOr<RecordSurvey> SurveyRecords(const std::vector<std::string>& files,
                                           int64_t max_records);

// The shape [height, width, channels] of the image that bytes feature
// `name` holds in the first record of `files`: a PNG's own, or raw bytes'
// from the record's int64 `height`, `width` and `depth` (or `channels`; 1
// when neither) when their product is the bytes' length, as `pstrain data
// to-tfrecord` and TensorFlow's MNIST convert_to_records write them. Empty
// when the record holds no such image or the files do not read: the shape
// must then be given.
std::vector<int64_t> FirstImageShape(const std::vector<std::string>& files,
                                     const std::string& name);

// A model config's `input` block that reads such files with
// `train_files` and `test_files` as given: "label" (or the one int64
// feature of one value named like a label: label, labels, class, target, y)
// as the label; a PNG of one shape as `decode: "png"` and raw bytes of one
// length (with height/width/depth features whose product is that length,
// left out) as `decode: "raw_uint8"`, both with scale 1/255; floats as
// dense features of their length (max_len when it varies); int64s as ids
// (vocabulary: their largest + 1); other bytes as string ids (hash_buckets).
// Lines a user must check are marked with a comment.
std::string SuggestInputBlock(const RecordSurvey& survey, const std::string& train_files,
                              const std::string& test_files);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_RECORD_SURVEY_H_
