#include "cli/data_tool.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/exit_codes.h"
#include "data/convert.h"
#include "data/dataset.h"
#include "data/tfrecord.h"

namespace pstrain {

int DataMain(CliArgs& args) {
  auto fail = [](const absl::Status& s, int code) {
    std::fprintf(stderr, "pstrain data: %s\n", std::string(s.message()).c_str());
    return code;
  };
  const std::string what = args.positional().size() == 2 ? args.positional()[1] : "";
  if (what != "shard" && what != "to-tfrecord") {
    return fail(absl::InvalidArgumentError(
                    "usage: pstrain data shard --data_dir=DIR --out=DIR --files=N\n"
                    "       pstrain data to-tfrecord --data_dir=DIR --out=DIR [--files=N] "
                    "[--compression=GZIP|NONE]"),
                kExitBadConfig);
  }
  auto data_dir = args.GetString("data_dir", "/usr/share/datasets/fashion-mnist");
  auto out = args.GetString("out", "");
  auto files = args.GetInt("files", what == "shard" ? 0 : 1);
  auto compression_name = args.GetString("compression", "GZIP");
  for (const absl::Status& s :
       {data_dir.status(), out.status(), files.status(), compression_name.status()}) {
    if (!s.ok()) return fail(s, kExitBadConfig);
  }
  if (what == "to-tfrecord") {
    auto compression = data::ParseCompression(*compression_name);
    if (!compression.ok()) return fail(compression.status(), kExitBadConfig);
    if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s, kExitBadConfig);
    if (out->empty()) {
      return fail(absl::InvalidArgumentError("--out=DIR is missing: where to write the files"),
                  kExitBadConfig);
    }
    auto splits = data::WriteIdxAsTfRecord(*data_dir, *out, static_cast<int>(*files),
                                           *compression);
    if (!splits.ok()) {
      return fail(splits.status(), splits.status().code() == absl::StatusCode::kInvalidArgument
                                       ? kExitBadConfig
                                       : kExitPermanent);
    }
    for (const data::ConvertedSplit& split : *splits) {
      for (size_t i = 0; i < split.files.size(); ++i) {
        std::printf("%s: %lld examples\n", split.files[i].c_str(),
                    static_cast<long long>(split.examples[i]));
      }
    }
    std::printf("features: image (float, 784 values in [0, 1]), label (int64); "
                "configs/fashion_mnist_tfrecord.pbtxt reads them with --data_dir=%s\n",
                out->c_str());
    return kExitOk;
  }
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return fail(s, kExitBadConfig);
  if (out->empty()) {
    return fail(absl::InvalidArgumentError("--out=DIR is missing: where to write the copy"),
                kExitBadConfig);
  }
  if (*files < 1) {
    return fail(absl::InvalidArgumentError(
                    absl::StrCat("--files=", *files, ": must be at least 1")),
                kExitBadConfig);
  }
  auto counts = data::WriteShardedCopy(*data_dir, *out, static_cast<int>(*files));
  if (!counts.ok()) {
    return fail(counts.status(), counts.status().code() == absl::StatusCode::kInvalidArgument
                                     ? kExitBadConfig
                                     : kExitPermanent);
  }
  for (size_t i = 0; i < counts->size(); ++i) {
    std::printf("%s/train-*-idx*-ubyte-%05zu-of-%05zu.gz: %lld examples\n", out->c_str(), i,
                counts->size(), static_cast<long long>((*counts)[i]));
  }
  std::printf("%s/t10k-*-idx*-ubyte.gz: the test split, one file\n", out->c_str());
  return kExitOk;
}

}  // namespace pstrain
