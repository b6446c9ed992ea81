// A record format with its feature spec: how a job's files are opened and
// how each record becomes one example of the common layout (dense floats,
// ids, a label; data/feature_spec.h). The loaders and the stream
// (data/input.h, data/example_stream.h) read every format through it.
// A RecordFormat is immutable and thread-safe; a RecordDecoder holds
// scratch space and is thread-compatible (one per thread).
#ifndef PSTRAIN_DATA_RECORD_FORMAT_H_
#define PSTRAIN_DATA_RECORD_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/byte_source.h"
#include "data/feature_spec.h"
#include "data/record_reader.h"

namespace pstrain::data {

class RecordDecoder {
 public:
  virtual ~RecordDecoder() = default;
  // One record into dense[dense_width()], ids[ids_width()] and *label.
  // InvalidArgument naming what is wrong (the caller adds where).
  virtual absl::Status Decode(absl::string_view record, float* dense, int64_t* ids,
                              int32_t* label) = 0;
};

class RecordFormat {
 public:
  virtual ~RecordFormat() = default;
  virtual int64_t dense_width() const = 0;
  virtual int64_t ids_width() const = 0;
  // A reader of one file (past any header the format has).
  virtual absl::StatusOr<std::unique_ptr<RecordReader>> OpenFile(const std::string& path,
                                                                 Compression compression) const = 0;
  // `num_classes` > 0 bounds the labels.
  virtual std::unique_ptr<RecordDecoder> NewDecoder(int64_t num_classes) const = 0;
};

// Logs a bad record passed over (skip_bad_records) to stderr.
void LogSkippedRecord(absl::string_view what);

// tf.train.Example records in TFRecord files, decoded by `decoder`.
std::shared_ptr<const RecordFormat> TfRecordExamples(std::shared_ptr<const ExampleDecoder> decoder);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_RECORD_FORMAT_H_
