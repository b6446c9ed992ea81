#include "data/convert.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

absl::StatusOr<ConvertedSplit> WriteSplit(const Dataset& ds, const std::string& out,
                                          const std::string& prefix, int files,
                                          Compression compression) {
  ConvertedSplit split;
  const int64_t n = ds.num_examples;
  for (int i = 0; i < files; ++i) {
    const std::string path = absl::StrFormat("%s/%s-%05d-of-%05d.tfrecord%s", out, prefix, i, files,
                                             compression == Compression::kGzip ? ".gz" : "");
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, compression));
    const int64_t begin = i * n / files, end = (i + 1) * n / files;
    for (int64_t e = begin; e < end; ++e) {
      PSTRAIN_RETURN_IF_ERROR(writer->Write(
          IdxExample(ds.features.data() + e * ds.example_dim, ds.example_dim, ds.labels[e])));
    }
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    split.files.push_back(path);
    split.examples.push_back(end - begin);
  }
  return split;
}

}  // namespace

std::string IdxExample(const float* image, int64_t dim, int32_t label) {
  v1::Example e;
  auto& features = *e.mutable_features()->mutable_feature();
  auto* values = features["image"].mutable_float_list()->mutable_value();
  values->Add(image, image + dim);
  features["label"].mutable_int64_list()->add_value(label);
  return e.SerializeAsString();
}

absl::StatusOr<std::vector<ConvertedSplit>> WriteIdxAsTfRecord(const std::string& dir,
                                                               const std::string& out, int files,
                                                               Compression compression) {
  std::error_code ec;
  if (std::filesystem::equivalent(dir, out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(out, " is the data directory itself"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(Dataset train, LoadMnistFormat(dir, Split::kTrain));
  PSTRAIN_ASSIGN_OR_RETURN(Dataset test, LoadMnistFormat(dir, Split::kTest));
  const int64_t max_files = std::min<int64_t>(train.num_examples, 99999);
  if (files < 1 || files > max_files) {
    return absl::InvalidArgumentError(
        absl::StrCat("files=", files, ": must be from 1 to ", max_files,
                     " (the training examples, one at least per file)"));
  }
  std::vector<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "train-") || absl::StartsWith(name, "test-")) {
      present.push_back(name);
    }
  }
  if (!present.empty()) {
    std::sort(present.begin(), present.end());
    return absl::FailedPreconditionError(absl::StrCat(out, " already holds ", present[0],
                                                      ": write to a directory without data files"));
  }
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(out));
  std::vector<ConvertedSplit> splits;
  PSTRAIN_ASSIGN_OR_RETURN(ConvertedSplit t, WriteSplit(train, out, "train", files, compression));
  splits.push_back(std::move(t));
  PSTRAIN_ASSIGN_OR_RETURN(t, WriteSplit(test, out, "test", 1, compression));
  splits.push_back(std::move(t));
  return splits;
}

}  // namespace pstrain::data
