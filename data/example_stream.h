// Streams one replica's share of a training split held in record files (of
// any RecordFormat: TFRecord of tf.train.Example, CSV), epoch after epoch,
// without holding the split in memory: records are read, decoded
// (data/record_format.h) and mixed through a bounded shuffle buffer as
// tf.data's shuffle(buffer_size) does.
//
// Each epoch e reads the files in an order drawn from (seed, e), the same
// on every replica. Sharding follows tf.data's auto-sharding: by file
// (replica r of R reads files r, r + R, ... of the sorted list) or by
// record (every replica reads every file and takes records r, r + R, ...
// of the epoch's sequence). The shuffle buffer is drawn from (seed, e, r).
// An epoch is exactly batches_per_epoch() batches (its last, short batch
// is dropped), so a replica's position is (epoch, batches into it): Seek
// opens that epoch and replays it to the batch, which is how a job resumes
// from a checkpoint at its place in the stream.
//
// Open() counts the records once (the framing only, seeking over the data
// of plain TFRecord files; with skip_bad_records each record is decoded so
// that bad ones are not counted): every replica learns the size of every
// share without reading the data into memory.
//
// Errors: Open's are the readers' and the decoder's; Next's are a bad
// record (DataLoss "FILE at byte N: what", "FILE line N: what") unless
// skip_bad, and DataLoss when the files hold fewer records than they did
// at Open.
// Thread-compatible.
#ifndef PSTRAIN_DATA_EXAMPLE_STREAM_H_
#define PSTRAIN_DATA_EXAMPLE_STREAM_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_source.h"
#include "data/record_format.h"
#include "data/record_range.h"

namespace pstrain::data {

struct StreamSpec {
  // The whole split, sorted: each file, or the records of it a TFDS
  // split slice reads.
  std::vector<RecordRange> files;
  std::vector<Compression> compressions;  // one per file
  int replica = 0;
  int num_replicas = 1;
  bool by_file = false;  // REQUIRES: files.size() >= num_replicas when set
  int batch_size = 1;
  uint64_t seed = 0;
  int64_t shuffle_buffer = 1;  // examples held; 1 reads in file order
  bool skip_bad = false;       // log and count bad records instead of failing
  int64_t num_classes = 0;     // > 0: labels must be below it
  // The buffer holds each record as read and decodes it as it is handed
  // out (unless skip_bad, which decodes on reading to tell the bad from the
  // good): for images, whose encoded bytes are a small share of the floats
  // they decode to (a 30 kB JPEG, 600 kB of floats at 224x224x3).
  bool hold_encoded = false;
};

class ExampleStream : public BatchSource {
 public:
  // REQUIRES: batch_size >= 1, shuffle_buffer >= 1, 0 <= replica <
  // num_replicas.
  static absl::StatusOr<std::unique_ptr<ExampleStream>> Open(
      const StreamSpec& spec, std::shared_ptr<const RecordFormat> format);

  int64_t example_dim() const override { return format_->dense_width(); }
  int64_t ids_dim() const override { return format_->ids_width(); }
  int batch_size() const override { return spec_.batch_size; }
  int64_t shard_size() const override { return shard_size_; }
  // Records in the whole split (every replica's share).
  int64_t split_examples() const { return split_examples_; }
  // Files this replica reads each epoch.
  int files_read() const { return static_cast<int>(own_files_.size()); }
  // Bad records passed over so far (skip_bad), counting Open's pass.
  int64_t skipped_records() const { return skipped_; }

  absl::StatusOr<int64_t> Next(float* features, int32_t* labels, int64_t* ids = nullptr) override;
  absl::Status Seek(int64_t batch) override;

 private:
  ExampleStream(const StreamSpec& spec, std::shared_ptr<const RecordFormat> format);

  absl::Status Count();
  // File i of the spec, limited to its records.
  absl::StatusOr<std::unique_ptr<RecordReader>> OpenFile(int i) const;
  void StartEpoch(int64_t epoch);
  // Decodes this replica's next record of the epoch into buffer slot
  // `slot`: true, or false when the epoch's files are used up.
  absl::StatusOr<bool> ReadInto(int64_t slot);
  // Hands out one example (copying it unless `dense` is null).
  absl::Status Emit(float* dense, int64_t* ids, int32_t* label);

  const StreamSpec spec_;
  const std::shared_ptr<const RecordFormat> format_;
  const std::unique_ptr<RecordDecoder> decoder_;
  std::vector<int> own_files_;  // indices of the files this replica reads
  int64_t shard_size_ = 0;
  int64_t split_examples_ = 0;
  int64_t skipped_ = 0;

  // The epoch being read.
  int64_t epoch_ = -1;
  int64_t emitted_ = 0;          // examples handed out in this epoch
  std::vector<int> file_order_;  // this epoch's order of the files read
  size_t next_file_ = 0;
  std::unique_ptr<RecordReader> reader_;
  int64_t sequence_ = 0;  // by record: the epoch's records so far
  std::mt19937_64 rng_;
  // The shuffle buffer: `held_` examples in slots [0, held_), decoded, or
  // (encoded()) each slot's record and where it was read.
  std::vector<float> dense_;
  std::vector<int64_t> ids_;
  std::vector<int32_t> labels_;
  std::vector<std::string> records_;
  std::vector<std::string> wheres_;
  bool encoded() const { return spec_.hold_encoded && !spec_.skip_bad; }
  int64_t slots() const {
    return static_cast<int64_t>(encoded() ? records_.size() : labels_.size());
  }
  int64_t held_ = 0;
  bool drained_ = false;  // the epoch's files are used up
  std::string record_;
  std::vector<int64_t> scratch_ids_;  // ids decoded for a caller that takes none
};

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_EXAMPLE_STREAM_H_
