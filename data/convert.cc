#include "data/convert.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/float_ops.h"
#include "base/status_macros.h"
#include "data/idx_reader.h"
#include "data/jpeg_image.h"
#include "data/png_image.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// `ds` holds its images as bytes (Dataset::pixels), each height x width.
absl::StatusOr<ConvertedSplit> WriteSplit(const Dataset& ds, int64_t height, int64_t width,
                                          const std::string& out, const std::string& prefix,
                                          int files, Compression compression,
                                          ImageEncoding encoding) {
  ConvertedSplit split;
  const int64_t n = ds.num_examples;
  for (int i = 0; i < files; ++i) {
    const std::string path = TfRecordSplitPath(out, prefix, i, files, compression);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, compression));
    const int64_t begin = i * n / files, end = (i + 1) * n / files;
    for (int64_t e = begin; e < end; ++e) {
      PSTRAIN_ASSIGN_OR_RETURN(
          std::string example,
          IdxExample(ds.pixels.data() + e * ds.example_dim, height, width, ds.labels[e], encoding));
      PSTRAIN_RETURN_IF_ERROR(writer->Write(example));
    }
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    split.files.push_back(path);
    split.examples.push_back(end - begin);
  }
  return split;
}

// FailedPrecondition when `out` holds train-* or test-* files already.
// The Example of one CSV row's values.
std::string CsvExample(const FeatureSpec& spec, const std::vector<CsvFeatureValues>& values,
                       int64_t label) {
  v1::Example e;
  auto& features = *e.mutable_features()->mutable_feature();
  for (size_t i = 0; i < spec.features.size(); ++i) {
    v1::Feature& f = features[spec.features[i].name];
    const CsvFeatureValues& v = values[i];
    switch (spec.features[i].type) {
      case FeatureType::kFloat:
        f.mutable_float_list()->mutable_value()->Add(v.floats.begin(), v.floats.end());
        break;
      case FeatureType::kInt64:
        f.mutable_int64_list()->mutable_value()->Add(v.ints.begin(), v.ints.end());
        break;
      case FeatureType::kString:
        for (const std::string& s : v.strings) f.mutable_bytes_list()->add_value(s);
        break;
    }
  }
  features[spec.label].mutable_int64_list()->add_value(label);
  return e.SerializeAsString();
}

absl::StatusOr<ConvertedSplit> WriteCsvSplit(const std::string& data_dir, const InputSpec& input,
                                             const std::string& pattern, const std::string& out,
                                             const std::string& prefix, Compression compression) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(pattern, data_dir));
  PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const RecordFormat> opened,
                           OpenFormat(data_dir, input, files));
  auto format = std::dynamic_pointer_cast<const CsvFormat>(opened);
  if (format == nullptr) return absl::InvalidArgumentError("the input is not CSV or TSV");
  ConvertedSplit split;
  const int n = static_cast<int>(files.size());
  CsvRow row;
  std::vector<CsvFeatureValues> values;
  std::string text;
  for (int i = 0; i < n; ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(const Compression in_compression, CompressionOf(input, files[i]));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordReader> reader,
                             format->OpenFile(files[i], in_compression));
    const std::string path = TfRecordSplitPath(out, prefix, i, n, compression);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, compression));
    while (true) {
      const int64_t at = reader->offset();
      absl::StatusOr<bool> more = reader->Next(&text);
      absl::Status bad = more.status();
      if (more.ok() && !*more) break;
      int64_t label = 0;
      if (bad.ok()) {
        bad = row.Parse(text, format->dialect());
        if (bad.ok()) bad = format->Values(row, &values, &label);
        if (!bad.ok())
          bad = absl::DataLossError(absl::StrCat(reader->Where(at), ": ", bad.message()));
      }
      if (!bad.ok()) {
        if (!input.skip_bad_records) return bad;
        ++split.skipped;
        LogSkippedRecord(bad.message());
        if (!reader->can_continue()) break;
        continue;
      }
      PSTRAIN_RETURN_IF_ERROR(writer->Write(CsvExample(format->spec(), values, label)));
    }
    split.examples.push_back(writer->records());
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    split.files.push_back(path);
  }
  return split;
}

}  // namespace

absl::StatusOr<ImageEncoding> ParseImageEncoding(absl::string_view name) {
  if (name == "floats") return ImageEncoding::kFloats;
  if (name == "raw") return ImageEncoding::kRaw;
  if (name == "png") return ImageEncoding::kPng;
  if (name == "jpeg") return ImageEncoding::kJpeg;
  return absl::InvalidArgumentError(
      absl::StrCat("image encoding \"", name, "\" is not one of floats, raw, png, jpeg"));
}

absl::StatusOr<std::string> IdxExample(const uint8_t* pixels, int64_t height, int64_t width,
                                       int32_t label, ImageEncoding encoding) {
  const int64_t dim = height * width;
  v1::Example e;
  auto& features = *e.mutable_features()->mutable_feature();
  switch (encoding) {
    case ImageEncoding::kFloats: {
      auto* values = features["image"].mutable_float_list()->mutable_value();
      values->Resize(static_cast<int>(dim), 0.0f);
      BytesToFloats(pixels, dim, kPixelScale, values->mutable_data());
      break;
    }
    case ImageEncoding::kRaw:
      features["image_raw"].mutable_bytes_list()->add_value(
          std::string(reinterpret_cast<const char*>(pixels), dim));
      features["height"].mutable_int64_list()->add_value(height);
      features["width"].mutable_int64_list()->add_value(width);
      features["depth"].mutable_int64_list()->add_value(1);
      break;
    case ImageEncoding::kPng: {
      PSTRAIN_ASSIGN_OR_RETURN(std::string png, EncodePng(pixels, height, width, 1));
      features["image"].mutable_bytes_list()->add_value(std::move(png));
      break;
    }
    case ImageEncoding::kJpeg: {
      PSTRAIN_ASSIGN_OR_RETURN(std::string jpeg, EncodeJpeg(pixels, height, width, 1));
      features["image"].mutable_bytes_list()->add_value(std::move(jpeg));
      break;
    }
  }
  features["label"].mutable_int64_list()->add_value(label);
  return e.SerializeAsString();
}

absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsTfRecord(const std::string& dir,
                                                               const std::string& out, int files,
                                                               Compression compression,
                                                               ImageEncoding encoding) {
  std::error_code ec;
  if (std::filesystem::equivalent(dir, out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(out, " is the data directory itself"));
  }
  // The images as their bytes, and their rows and columns from the header.
  PSTRAIN_ASSIGN_OR_RETURN(ReplicaData train_data,
                           LoadReplicaData(dir, Split::kTrain, 0, 1, /*pixels_as_bytes=*/true));
  PSTRAIN_ASSIGN_OR_RETURN(ReplicaData test_data,
                           LoadReplicaData(dir, Split::kTest, 0, 1, /*pixels_as_bytes=*/true));
  const Dataset& train = train_data.dataset;
  const Dataset& test = test_data.dataset;
  PSTRAIN_ASSIGN_OR_RETURN(SplitFiles train_files, FindSplitFiles(dir, Split::kTrain));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIdxDims(train_files.images[0]));
  const int64_t height = dims.size() >= 2 ? dims[1] : 1;
  const int64_t width = train.example_dim / std::max<int64_t>(height, 1);
  const int64_t max_files = std::min<int64_t>(train.num_examples, 99999);
  if (files < 1 || files > max_files) {
    return absl::InvalidArgumentError(
        absl::StrCat("files=", files, ": must be from 1 to ", max_files,
                     " (the training examples, one at least per file)"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckNoSplitFiles(out));
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(out));
  std::vector<ConvertedSplit> splits;
  PSTRAIN_ASSIGN_OR_RETURN(ConvertedSplit t, WriteSplit(train, height, width, out, "train", files,
                                                        compression, encoding));
  splits.push_back(std::move(t));
  PSTRAIN_ASSIGN_OR_RETURN(t,
                           WriteSplit(test, height, width, out, "test", 1, compression, encoding));
  splits.push_back(std::move(t));
  return splits;
}

absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsCsv(const std::string& dir,
                                                          const std::string& out) {
  std::vector<ConvertedSplit> splits;
  for (Split split : {Split::kTrain, Split::kTest}) {
    const std::string path =
        absl::StrCat(out, "/fashion-mnist_", split == Split::kTrain ? "train" : "test", ".csv");
    if (std::filesystem::exists(path)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is there already"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(Dataset ds, LoadMnistFormat(dir, split));
    std::string text = "label";
    for (int64_t k = 1; k <= ds.example_dim; ++k) absl::StrAppend(&text, ",pixel", k);
    text.push_back('\n');
    text.reserve(ds.num_examples * ds.example_dim * 3);
    for (int64_t e = 0; e < ds.num_examples; ++e) {
      absl::StrAppend(&text, ds.labels[e]);
      const float* image = ds.features.data() + e * ds.example_dim;
      // The loader's pixel * (1 / 255), back to the pixel.
      for (int64_t k = 0; k < ds.example_dim; ++k) {
        absl::StrAppend(&text, ",", std::lround(image[k] * 255.0f));
      }
      text.push_back('\n');
    }
    PSTRAIN_RETURN_IF_ERROR(MakeDirs(out));
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(path, text));
    ConvertedSplit written;
    written.files.push_back(path);
    written.examples.push_back(ds.num_examples);
    splits.push_back(std::move(written));
  }
  return splits;
}

absl::StatusOr<std::vector<ConvertedSplit>> WriteCsvAsTfRecord(const std::string& data_dir,
                                                               const InputSpec& input,
                                                               const std::string& out,
                                                               Compression compression) {
  if (input.format != InputFormat::kCsv) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input is ", InputFormatName(input), ", not CSV or TSV: there is nothing to convert"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckNoSplitFiles(out));
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(out));
  std::vector<ConvertedSplit> splits;
  for (const auto& [pattern, prefix] :
       {std::pair{input.train_files, "train"}, std::pair{input.test_files, "test"}}) {
    if (pattern.empty()) continue;
    PSTRAIN_ASSIGN_OR_RETURN(ConvertedSplit split,
                             WriteCsvSplit(data_dir, input, pattern, out, prefix, compression));
    splits.push_back(std::move(split));
  }
  return splits;
}

}  // namespace pstrain::data
