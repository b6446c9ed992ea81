// Reads serialized tf.train.Example messages (proto/example.proto) in place,
// without building the protobuf objects: a training input pipeline parses
// one per example, and the generated parser's map and repeated fields cost
// more than the values are worth. The wire format is TensorFlow's:
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
//                      Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }
//   FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
// Lists are read packed or unpacked, as protobuf parsers must. Protobuf's
// rules hold: of a name given twice the last entry counts, of a Feature's
// kinds the last one set, a kind's list given in pieces is their
// concatenation, and unknown fields (a known number with another wire type
// among them, and groups, wire types 3 and 4, with all they hold) are
// skipped. One thing protobuf would take is refused with an error: a map
// entry whose value is itself given in pieces, which no Example writer
// produces.
//
// Errors are InvalidArgument "Example at byte N: what", N counted from the
// start of the serialized message. Stateless; thread-safe.
#ifndef PSTRAIN_DATA_EXAMPLE_PARSER_H_
#define PSTRAIN_DATA_EXAMPLE_PARSER_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain::data {

enum class ListKind { kNone, kBytes, kFloat, kInt64 };

// "bytes_list", "float_list", "int64_list" or "no value".
const char* ListKindName(ListKind kind);

// One feature of a parsed Example: views into the serialized bytes, valid
// while they are.
struct FeatureView {
  absl::string_view name;
  ListKind kind = ListKind::kNone;
  // The Feature message from the first piece of its last kind on.
  absl::string_view body;
  int64_t body_offset = 0;  // of `body` in the Example, for messages
};

// The features of an Example by name. Reused between calls, it allocates
// nothing once warm.
class ParsedExample {
 public:
  absl::Status Parse(absl::string_view example);

  // The feature named `name`, or nullptr when the Example has none.
  const FeatureView* Find(absl::string_view name) const;
  const std::vector<FeatureView>& features() const { return features_; }

 private:
  absl::Status ParseEntry(absl::string_view bytes, int64_t base);

  std::vector<FeatureView> features_;  // in order; a later one wins
};

// The values of a feature's list, in order: the count, writing the first
// min(count, capacity) of them to `out`; or an error naming the byte at
// fault. REQUIRES: the view's kind matches (kFloat, kInt64).
absl::StatusOr<int64_t> ReadFloats(const FeatureView& feature, float* out, int64_t capacity);
absl::StatusOr<int64_t> ReadInt64s(const FeatureView& feature, int64_t* out, int64_t capacity);
// Calls `out` with each value of a bytes_list, in order; returns the count.
absl::StatusOr<int64_t> ReadBytes(const FeatureView& feature,
                                  absl::FunctionRef<void(absl::string_view)> out);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_EXAMPLE_PARSER_H_
