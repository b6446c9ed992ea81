// Where a job's examples come from and how they are read: the MNIST IDX
// files of a data directory (the default), or files named by glob patterns,
// TFRecord of tf.train.Example or CSV/TSV (data/csv_input.h), decoded
// through a feature spec (data/feature_spec.h). Every source gives the same in-memory
// Dataset (dense floats, id sequences, labels), sharded among replicas the
// way tf.data's auto-sharding does it: by file when there are at least as
// many files as replicas, else by record (data/dataset.h).
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_INPUT_H_
#define PSTRAIN_DATA_INPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_source.h"
#include "data/csv_input.h"
#include "data/dataset.h"
#include "data/feature_spec.h"
#include "data/record_format.h"
#include "data/record_range.h"
#include "data/tfrecord.h"

namespace pstrain::data {

// kCsv is CSV or TSV, as InputSpec::csv's dialect says. kTfds is a
// TensorFlow Datasets version directory (data/tfds.h): the data directory
// itself, its TFRecord shards read as kTfRecord's are, the split slices
// by InputSpec::train_split and test_split.
enum class InputFormat { kIdx, kTfRecord, kCsv, kTfds };

struct InputSpec {
  InputFormat format = InputFormat::kIdx;
  // Glob patterns of each split's files ("train-*.tfrecord.gz"); a
  // relative pattern is taken under the job's data_dir, so a container job
  // finds "/data/data/train-*" from data_dir /data/data.
  std::string train_files;
  std::string test_files;
  // kTfds: TFDS's split syntax ("train", "train[:80%]", "train[80%:]+test").
  std::string train_split = "train";
  std::string test_split = "test";
  // CSV/TSV: the dialect and the columns.
  CsvOptions csv;
  // The files' compression; none: by each file's name (".gz" is GZIP).
  std::optional<Compression> compression;
  // A relative vocabulary_file is taken under data_dir too.
  FeatureSpec features;
  // A record that cannot be read or decoded is skipped, counted and logged,
  // instead of failing the job.
  bool skip_bad_records = false;
  // Training files: 0 loads the replica's share into memory and shuffles
  // it whole each epoch; N > 0 streams it through a shuffle buffer of N
  // examples (data/example_stream.h), for a set larger than memory.
  int64_t shuffle_buffer = 0;
};

// Sets the format named "idx", "tfrecord", "csv" (comma, RFC 4180 quotes),
// "tsv" (tab, no quoting) or "tfds"; InvalidArgument naming anything else.
absl::Status SetInputFormat(absl::string_view name, InputSpec* input);
const char* InputFormatName(const InputSpec& input);

// How `path` is compressed: as the input says, or by its name (".gz").
absl::StatusOr<Compression> CompressionOf(const InputSpec& input, const std::string& path);

// The files `pattern` names, sorted; relative patterns under `data_dir`.
// NotFound naming the pattern when it matches no file, or naming the
// directory when that does not exist; PermissionDenied when it cannot be
// listed.
absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& pattern,
                                                     const std::string& data_dir);

// Counts kept while reading.
struct ReadCounts {
  int64_t records = 0;  // decoded into the data set
  int64_t skipped = 0;  // bad records passed over (skip_bad_records)
};

// The record format of a split's `files` (REQUIRES: not empty; a CSV
// format reads the first one's header), with vocabulary files taken under
// data_dir. Errors: the decoder's and CsvFormat::Create's.
absl::StatusOr<std::shared_ptr<const RecordFormat>> OpenFormat(
    const std::string& data_dir, const InputSpec& input, const std::vector<std::string>& files);

// The files (or, from a TFDS split slice, the parts of files) of one split,
// in order: the split's pattern expanded (ExpandFiles), or the TFDS split
// resolved over the data directory (ReadTfdsDirectory, ResolveSplit).
absl::StatusOr<std::vector<RecordRange>> FilesOfSplit(const std::string& data_dir,
                                                      const InputSpec& input, Split split);

// Appends every record of one file (its range's) to `ds`, decoded by `decoder` (of
// `format`; REQUIRES: ds empty, or of the format's widths). A bad record
// is DataLoss "WHERE: what" (the reader's message, or the decoder's with
// where the record begins) unless `skip_bad`: then it is logged to stderr
// and counted, and when the rest of the file cannot be read, the rest is
// skipped as one. `framed` (optional) counts the records the file frames,
// decodable or not: what every replica counts the same for a file. With
// `byte_scale` (ByteImageScale's), the dense values are held as bytes
// (Dataset::pixels, pixel_scale = byte_scale) while each one is a byte
// times byte_scale; the first that is not (a default_value) turns `ds` to
// floats (HoldAsFloats), the same values.
absl::Status AppendRecordFile(const RecordRange& file, Compression compression,
                              const RecordFormat& format, RecordDecoder* decoder, bool skip_bad,
                              Dataset* ds, ReadCounts* counts, int64_t* framed = nullptr,
                              float byte_scale = 0);

// When `input`'s examples have one dense feature and it is an image stored
// as bytes (TFRecord, decode raw_uint8, png, jpeg or image, no offset),
// whose values are bytes times its scale (until one is resized): that
// scale. 0 otherwise.
float ByteImageScale(const InputSpec& input);

// Replica `replica` of `num_replicas`'s share of a split (LoadReplicaData's
// rules, for every format). `num_classes` > 0 bounds the labels. With
// `pixels_as_bytes`, IDX images and TFRecord images stored as bytes
// (ByteImageScale) stay bytes (Dataset::pixels).
// Errors: the format's (NotFound, DataLoss naming file and offset), the
// decoder's (InvalidArgument naming the feature).
absl::StatusOr<ReplicaData> LoadInput(const std::string& data_dir, const InputSpec& input,
                                      Split split, int replica, int num_replicas,
                                      int64_t num_classes, bool pixels_as_bytes = false);

// One replica's training batches: the share LoadInput loads, iterated by a
// ShardIterator (by file: its files whole; by record: every R-th example),
// or with a shuffle_buffer an ExampleStream over the files.
struct TrainingInput {
  std::unique_ptr<BatchSource> source;
  bool streamed = false;
  bool by_file = false;
  int files_read = 0;
  int files_total = 0;
  int64_t split_examples = 0;   // ReplicaData's
  int64_t skipped_records = 0;  // ReplicaData's
};
// REQUIRES: batch_size >= 1. Errors as LoadInput and ExampleStream::Open.
absl::StatusOr<TrainingInput> OpenTrainingInput(const std::string& data_dir, const InputSpec& input,
                                                int replica, int num_replicas, int batch_size,
                                                uint64_t seed, int64_t num_classes);

// The whole split (one replica). With `pixels_as_bytes`, images stay bytes
// as LoadInput's do: for a split that is only scored
// (model::EvaluateExamples) or cut into batches.
absl::StatusOr<Dataset> LoadInputSplit(const std::string& data_dir, const InputSpec& input,
                                       Split split, int64_t num_classes,
                                       bool pixels_as_bytes = false);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_INPUT_H_
