// TFRecord files, as TensorFlow's TFRecordWriter and tf.data read them: a
// sequence of records, each
//   uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of data, uint32 masked CRC-32C of the data
// (base/crc32c.h for the masking), the whole file optionally compressed
// with GZIP (a name ending in ".gz", or compression "GZIP"). Records are
// usually serialized tf.train.Example messages (proto/example.proto).
//
// Errors name the file and the byte offset of the record in the
// uncompressed stream: DataLoss for a corrupt length, a corrupt data
// checksum, a record cut short or a GZIP stream cut short or corrupt.
// Thread-compatible: one reader or writer per thread.
#ifndef PSTRAIN_DATA_TFRECORD_H_
#define PSTRAIN_DATA_TFRECORD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/byte_source.h"
#include "data/record_reader.h"

namespace pstrain::data {

// The bytes of one framed record.
std::string FrameRecord(absl::string_view data);

// The name of file i of n of a split ("train", "test") written under `out`,
// as TensorFlow's sharded outputs are named:
// OUT/SPLIT-IIIII-of-NNNNN.tfrecord, ".gz" added under GZIP.
std::string TfRecordSplitPath(const std::string& out, const std::string& split, int i, int n,
                              Compression compression);

// FailedPrecondition naming the first train-* or test-* file in `out` (a
// writer never mixes its split files with another data set's); OK when
// there are none or `out` does not exist yet.
absl::Status CheckNoSplitFiles(const std::string& out);

class TfRecordWriter {
 public:
  // Writes to a temporary file beside `path`; Close() makes it `path`
  // (fsync, then rename), so a reader never sees half a file.
  static absl::StatusOr<std::unique_ptr<TfRecordWriter>> Open(const std::string& path,
                                                              Compression compression);
  ~TfRecordWriter();  // without Close(): the temporary file is removed

  absl::Status Write(absl::string_view record);
  absl::Status Close();
  int64_t records() const { return records_; }

 private:
  struct File;
  TfRecordWriter(std::string path, std::unique_ptr<File> file);
  const std::string path_;
  std::unique_ptr<File> file_;
  int64_t records_ = 0;
};

class TfRecordReader : public RecordReader {
 public:
  // NotFound or a read error naming the path.
  static absl::StatusOr<std::unique_ptr<TfRecordReader>> Open(const std::string& path,
                                                              Compression compression);
  ~TfRecordReader() override;

  // The next record into `*record`: true, or false at the end of the file.
  // DataLoss naming the file and offset when the record is bad. After a
  // bad data checksum the reader is at the next record (can_continue());
  // after a bad length or a stream cut short the rest of the file cannot
  // be framed and Next returns false from then on.
  absl::StatusOr<bool> Next(std::string* record) override;
  // Frames the next record without reading or checking its data (so a bad
  // data checksum goes unseen): true, false at the end, or Next's errors
  // for its header and for a file that ends inside it. For counting
  // records: a plain file's data is seeked over, not read.
  absl::StatusOr<bool> Skip() override;
  bool can_continue() const override { return !lost_; }
  // Byte offset (uncompressed) of the next record.
  int64_t offset() const override { return offset_; }
  std::string Where(int64_t offset) const override;
  const std::string& path() const override { return path_; }

 private:
  TfRecordReader(std::string path, std::unique_ptr<ByteSource> source);
  // Reads the next record's header: true with its data's length in
  // `*length`, false at a clean end, or an error (and the rest is lost).
  absl::StatusOr<bool> Frame(uint64_t* length);
  absl::Status CutShort(int64_t at, uint64_t length, int64_t got);
  absl::Status Bad(int64_t at, absl::string_view what);

  const std::string path_;
  std::unique_ptr<ByteSource> source_;
  int64_t offset_ = 0;
  bool lost_ = false;
};

// Every record of a file (for tests and converters).
absl::StatusOr<std::vector<std::string>> ReadAllRecords(const std::string& path,
                                                        Compression compression);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_TFRECORD_H_
