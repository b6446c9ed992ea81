#include "data/record_format.h"

#include <cstdio>
#include <utility>

#include "data/example_parser.h"
#include "data/tfrecord.h"

namespace pstrain::data {
namespace {

class ExampleRecordDecoder : public RecordDecoder {
 public:
  ExampleRecordDecoder(std::shared_ptr<const ExampleDecoder> decoder, int64_t num_classes)
      : decoder_(std::move(decoder)), num_classes_(num_classes) {}
  absl::Status Decode(absl::string_view record, float* dense, int64_t* ids,
                      int32_t* label) override {
    return decoder_->Decode(record, &parsed_, dense, ids, label, num_classes_);
  }

 private:
  const std::shared_ptr<const ExampleDecoder> decoder_;
  const int64_t num_classes_;
  ParsedExample parsed_;
};

class TfRecordExampleFormat : public RecordFormat {
 public:
  explicit TfRecordExampleFormat(std::shared_ptr<const ExampleDecoder> decoder)
      : decoder_(std::move(decoder)) {}
  int64_t dense_width() const override { return decoder_->dense_width(); }
  int64_t ids_width() const override { return decoder_->ids_width(); }
  absl::StatusOr<std::unique_ptr<RecordReader>> OpenFile(const std::string& path,
                                                         Compression compression) const override {
    absl::StatusOr<std::unique_ptr<TfRecordReader>> reader =
        TfRecordReader::Open(path, compression);
    if (!reader.ok()) return reader.status();
    return std::unique_ptr<RecordReader>(std::move(*reader));
  }
  std::unique_ptr<RecordDecoder> NewDecoder(int64_t num_classes) const override {
    return std::make_unique<ExampleRecordDecoder>(decoder_, num_classes);
  }

 private:
  const std::shared_ptr<const ExampleDecoder> decoder_;
};

}  // namespace

void LogSkippedRecord(absl::string_view what) {
  std::fprintf(stderr, "pstrain: skipping a bad record (skip_bad_records): %s\n",
               std::string(what).c_str());
}

std::shared_ptr<const RecordFormat> TfRecordExamples(
    std::shared_ptr<const ExampleDecoder> decoder) {
  return std::make_shared<TfRecordExampleFormat>(std::move(decoder));
}

}  // namespace pstrain::data
