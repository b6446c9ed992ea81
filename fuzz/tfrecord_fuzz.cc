// TFRecord files, plain or GZIP, and the tf.train.Example in each record.
#include <cstdint>
#include <cstring>
#include <string>

#include "data/tfrecord.h"
#include "fuzz/temp_file.h"
#include "proto/example.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pstrain::fuzz::WriteTemp(data, size);
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  auto reader = pstrain::data::TfRecordReader::Open(
      path, gzip ? pstrain::data::Compression::kGzip : pstrain::data::Compression::kNone);
  if (!reader.ok()) __builtin_trap();
  std::string record;
  for (int i = 0; i < 1000; ++i) {
    const int64_t at = (*reader)->offset();
    auto more = (*reader)->Next(&record);
    if (!more.ok()) {
      if (!(*reader)->can_continue()) break;
      continue;
    }
    if (!*more) break;
    // A plain file's record is exactly its frame in the input.
    if (!gzip) {
      const std::string framed = pstrain::data::FrameRecord(record);
      if (static_cast<size_t>(at) + framed.size() > size ||
          std::memcmp(data + at, framed.data(), framed.size()) != 0) {
        __builtin_trap();
      }
    }
    // An Example that parses round-trips: written again and parsed, it
    // has the same features with the same number of values.
    pstrain::v1::Example example, again;
    if (example.ParseFromString(record)) {
      if (!again.ParseFromString(example.SerializeAsString())) __builtin_trap();
      const auto& a = example.features().feature();
      const auto& b = again.features().feature();
      if (a.size() != b.size()) __builtin_trap();
      for (const auto& [name, feature] : a) {
        auto it = b.find(name);
        if (it == b.end() || it->second.kind_case() != feature.kind_case() ||
            it->second.float_list().value_size() != feature.float_list().value_size() ||
            it->second.int64_list().value_size() != feature.int64_list().value_size() ||
            it->second.bytes_list().value_size() != feature.bytes_list().value_size()) {
          __builtin_trap();
        }
      }
    }
  }
  return 0;
}
