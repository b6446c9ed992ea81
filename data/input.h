// Where a job's examples come from and how they are read: the MNIST IDX
// files of a data directory (the default), or TFRecord files of
// tf.train.Example named by glob patterns and decoded through a feature
// spec (data/feature_spec.h). Every source gives the same in-memory
// Dataset (dense floats, id sequences, labels), sharded among replicas the
// way tf.data's auto-sharding does it: by file when there are at least as
// many files as replicas, else by record (data/dataset.h).
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_INPUT_H_
#define PSTRAIN_DATA_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/feature_spec.h"
#include "data/tfrecord.h"

namespace pstrain::data {

enum class InputFormat { kIdx, kTfRecord };

// "idx" or "tfrecord"; InvalidArgument naming anything else.
absl::StatusOr<InputFormat> ParseInputFormat(absl::string_view name);

struct InputSpec {
  InputFormat format = InputFormat::kIdx;
  // TFRecord: glob patterns of each split's files ("train-*.tfrecord.gz");
  // a relative pattern is taken under the job's data_dir, so a container
  // job finds "/data/data/train-*" from data_dir /data/data.
  std::string train_files;
  std::string test_files;
  // "" (by each file's name: ".gz" is GZIP), "NONE" or "GZIP".
  std::string compression;
  // A relative vocabulary_file is taken under data_dir too.
  FeatureSpec features;
  // A record that cannot be read or decoded is skipped, counted and logged,
  // instead of failing the job.
  bool skip_bad_records = false;
  // TFRecord training files: 0 loads the replica's share into memory and
  // shuffles it whole each epoch; N > 0 streams it through a shuffle
  // buffer of N examples (data/example_stream.h), for a set larger than
  // memory.
  int64_t shuffle_buffer = 0;
};

// The files `pattern` names, sorted; relative patterns under `data_dir`.
// NotFound naming the pattern when it matches no file.
absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& pattern,
                                                     const std::string& data_dir);

// Counts kept while reading.
struct ReadCounts {
  int64_t records = 0;  // decoded into the data set
  int64_t skipped = 0;  // bad records passed over (skip_bad_records)
};

// Appends every Example of one TFRecord file to `ds`, decoded by
// `decoder` (REQUIRES: ds empty, or of the decoder's widths). A bad record
// is DataLoss "FILE at byte N: what" (the framing's message, or the
// decoder's) unless `skip_bad`: then it is logged to stderr and counted,
// and when the rest of the file cannot be framed, the rest is skipped as
// one. `framed` (optional) counts the records the file frames, decodable
// or not: what every replica counts the same for a file.
absl::Status AppendTfRecordFile(const std::string& path, Compression compression,
                                const ExampleDecoder& decoder, bool skip_bad, int64_t num_classes,
                                Dataset* ds, ReadCounts* counts, int64_t* framed = nullptr);

// Replica `replica` of `num_replicas`'s share of a split (LoadReplicaData's
// rules, for every format). `num_classes` > 0 bounds the labels.
// Errors: the format's (NotFound, DataLoss naming file and offset), the
// decoder's (InvalidArgument naming the feature).
absl::StatusOr<ReplicaData> LoadInput(const std::string& data_dir, const InputSpec& input,
                                      Split split, int replica, int num_replicas,
                                      int64_t num_classes);

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

// The whole split (one replica).
absl::StatusOr<Dataset> LoadInputSplit(const std::string& data_dir, const InputSpec& input,
                                       Split split, int64_t num_classes);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_INPUT_H_
