// TensorBoard event files: the scalars a job reports (loss, accuracy,
// examples/s...) as TFRecord-framed Event messages (proto/event.proto), and
// the same scalars as JSON lines beside them.
//
// TFRecord framing, per record: uint64 length (little-endian), uint32
// masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of the
// data (base/crc32c.h). A file starts with an Event whose file_version is
// "brain.Event:2"; each WriteScalars call adds one Event whose summary
// holds one simple_value per tag.
#ifndef PSTRAIN_BASE_EVENT_FILE_H_
#define PSTRAIN_BASE_EVENT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain {

using Scalars = std::vector<std::pair<std::string, double>>;

// Thread-compatible.
class EventWriter {
 public:
  // Creates `dir` (and its parents), a new event file in it named
  // events.out.tfevents.<unix seconds>.<host>.<pid>[.<n>], and opens
  // <dir>/scalars.jsonl for appending (unless not `with_jsonl`). Internal
  // naming the path on failure.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Open(const std::string& dir,
                                                           bool with_jsonl = true);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event at `step` (wall time now) with a scalar per tag, and the
  // line {"wall_time": T, "step": S, "<tag>": value, ...} in scalars.jsonl
  // (a value that is not finite is written as null there). Both files are
  // flushed, so a reader sees every call that returned.
  absl::Status WriteScalars(int64_t step, const Scalars& scalars);

  // WriteScalars, unless scalars.jsonl already has a line of `step`: one
  // writer per step where two processes write summaries into one directory
  // (a job's chief and an evaluator the cluster does not list both score
  // the final checkpoint), so TensorBoard shows the step once. The look and
  // the write are made under an flock on <dir>/.scalars.lock, so of two
  // such writers exactly one writes. Returns whether this one wrote.
  // FailedPrecondition without scalars.jsonl (`with_jsonl` false).
  absl::StatusOr<bool> WriteScalarsOnce(int64_t step, const Scalars& scalars);

  // One Event at `step` holding one summary value `tag` with no scalar,
  // whose metadata names `plugin` and carries `content` (a TensorBoard
  // plugin's own message, e.g. the hparams plugin's). Flushed.
  absl::Status WritePluginData(int64_t step, const std::string& tag, const std::string& plugin,
                               const std::string& content);

  const std::string& path() const { return path_; }
  const std::string& jsonl_path() const { return jsonl_path_; }

 private:
  EventWriter() = default;
  absl::Status WriteRecord(const std::string& data);

  std::string dir_, path_, jsonl_path_;
  std::FILE* events_ = nullptr;
  std::FILE* jsonl_ = nullptr;
};

struct EventRecord {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;  // set on the first record only
  std::vector<std::pair<std::string, float>> scalars;
  struct PluginValue {
    std::string tag, plugin, content;
  };
  std::vector<PluginValue> plugin_values;  // values with plugin data
};

// Every record of an event file, every CRC checked. DataLoss naming the
// file and the record's byte offset for a length or data CRC mismatch, a
// record cut short, or data that is not an Event; NotFound when the file
// cannot be opened.
absl::StatusOr<std::vector<EventRecord>> ReadEventFile(const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_BASE_EVENT_FILE_H_
