#include "cli/data_tool.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/debian_corpus.h"
#include "base/exit_codes.h"
#include "data/click_data.h"
#include "data/convert.h"
#include "data/dataset.h"
#include "data/text_corpus.h"
#include "data/tfrecord.h"
#include "model/model_config.h"

namespace pstrain {
namespace {

constexpr char kUsage[] =
    "usage: pstrain data shard --data_dir=DIR --out=DIR --files=N\n"
    "       pstrain data to-tfrecord --data_dir=DIR --out=DIR [--files=N] "
    "[--compression=GZIP|NONE] [--image_encoding=floats|raw|png]\n"
    "       pstrain data to-csv --data_dir=DIR --out=DIR\n"
    "       pstrain data csv-to-tfrecord --model_config=FILE --out=DIR [--data_dir=DIR] "
    "[--compression=GZIP|NONE] [--skip_bad_records]\n"
    "       pstrain data text-to-tfrecord --train=FILE [--test=FILE] --out=DIR "
    "[--vocab_size=N] [--files=N] [--compression=GZIP|NONE]\n"
    "       pstrain data debian-descriptions --out=DIR [--vocab_size=N] [--files=N] "
    "[--min_class=N] [--compression=GZIP|NONE] [--packages=FILE --translations=FILE]\n"
    "       pstrain data clicks --out=DIR [--train_examples=N] [--test_examples=N] "
    "[--files=N] [--seed=N] [--compression=GZIP|NONE]";

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "pstrain data: %s\n", std::string(s.message()).c_str());
  return code;
}

// Bad arguments exit 2, the rest 1.
int FailWith(const absl::Status& s) {
  return Fail(s, s.code() == absl::StatusCode::kInvalidArgument ? kExitBadConfig : kExitPermanent);
}

absl::StatusOr<std::string> OutFlag(CliArgs& args) {
  auto out = args.GetString("out", "");
  if (out.ok() && out->empty()) {
    return absl::InvalidArgumentError("--out=DIR is missing: where to write the files");
  }
  return out;
}

// --compression (default GZIP).
absl::StatusOr<data::Compression> CompressionFlag(CliArgs& args) {
  auto name = args.GetString("compression", "GZIP");
  if (!name.ok()) return name.status();
  return data::ParseCompression(*name);
}

void PrintSplits(const std::vector<data::ConvertedSplit>& splits) {
  for (const data::ConvertedSplit& split : splits) {
    for (size_t i = 0; i < split.files.size(); ++i) {
      std::printf("%s: %lld examples\n", split.files[i].c_str(),
                  static_cast<long long>(split.examples[i]));
    }
    if (split.skipped > 0) {
      std::printf("%lld bad records skipped\n", static_cast<long long>(split.skipped));
    }
  }
}

int IdxToTfRecord(CliArgs& args) {
  auto data_dir = args.GetString("data_dir", "/usr/share/datasets/fashion-mnist");
  auto files = args.GetInt("files", 1);
  auto compression = CompressionFlag(args);
  auto encoding_name = args.GetString("image_encoding", "floats");
  for (const absl::Status& s :
       {data_dir.status(), files.status(), compression.status(), encoding_name.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto encoding = data::ParseImageEncoding(*encoding_name);
  if (!encoding.ok()) return Fail(encoding.status(), kExitBadConfig);
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  auto splits =
      data::WriteIdxAsTfRecord(*data_dir, *out, static_cast<int>(*files), *compression, *encoding);
  if (!splits.ok()) return FailWith(splits.status());
  PrintSplits(*splits);
  switch (*encoding) {
    case data::ImageEncoding::kFloats:
      std::printf(
          "features: image (float, 784 values in [0, 1]), label (int64); "
          "configs/fashion_mnist_tfrecord.pbtxt reads them with --data_dir=%s\n",
          out->c_str());
      break;
    case data::ImageEncoding::kRaw:
      std::printf(
          "features: image_raw (784 bytes), height, width, depth, label (int64); read them with "
          "feature { name: \"image_raw\" decode: \"raw_uint8\" length: 784 scale: "
          "0.00392156862745098 } and --data_dir=%s\n",
          out->c_str());
      break;
    case data::ImageEncoding::kPng:
      std::printf(
          "features: image (a 28x28 grayscale PNG), label (int64); "
          "configs/fashion_mnist_png.pbtxt reads them with --data_dir=%s\n",
          out->c_str());
      break;
  }
  return kExitOk;
}

int IdxToCsv(CliArgs& args) {
  auto data_dir = args.GetString("data_dir", "/usr/share/datasets/fashion-mnist");
  if (!data_dir.ok()) return Fail(data_dir.status(), kExitBadConfig);
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  auto splits = data::WriteIdxAsCsv(*data_dir, *out);
  if (!splits.ok()) return FailWith(splits.status());
  PrintSplits(*splits);
  std::printf(
      "columns: label, pixel1..pixel784 (0..255); configs/fashion_mnist_csv.pbtxt reads "
      "them with --data_dir=%s\n",
      out->c_str());
  return kExitOk;
}

int CsvToTfRecord(CliArgs& args) {
  auto config = args.GetString("model_config", "");
  auto data_dir = args.GetString("data_dir", ".");
  auto compression = CompressionFlag(args);
  auto skip_bad = args.GetBool("skip_bad_records", false);
  for (const absl::Status& s :
       {config.status(), data_dir.status(), compression.status(), skip_bad.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  if (config->empty()) {
    return Fail(absl::InvalidArgumentError(
                    "--model_config=FILE is missing: the config whose input block (format: "
                    "\"csv\" or \"tsv\") names the files and their features"),
                kExitBadConfig);
  }
  auto file = model::LoadModelConfigFile(*config);
  if (!file.ok()) return FailWith(file.status());
  data::InputSpec input = file->job.input;
  input.skip_bad_records = *skip_bad;
  auto splits = data::WriteCsvAsTfRecord(*data_dir, input, *out, *compression);
  if (!splits.ok()) return FailWith(splits.status());
  PrintSplits(*splits);
  const char* ext = *compression == data::Compression::kGzip ? ".tfrecord.gz" : ".tfrecord";
  std::printf(
      "to train on them, change the input block to format: tfrecord train_files: "
      "\"train-*%s\" test_files: \"test-*%s\" (the same features and label) and pass "
      "--data_dir=%s\n",
      ext, ext, out->c_str());
  return kExitOk;
}

int TextToTfRecord(CliArgs& args) {
  auto train = args.GetString("train", "");
  auto test = args.GetString("test", "");
  auto vocab = args.GetIntInRange("vocab_size", 20000, 1, int64_t{1} << 24);
  auto files = args.GetIntInRange("files", 1, 1, 99999);
  auto compression = CompressionFlag(args);
  for (const absl::Status& s :
       {train.status(), test.status(), vocab.status(), files.status(), compression.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  if (train->empty()) {
    return Fail(absl::InvalidArgumentError(
                    "--train=FILE is missing: the training texts, lines of label<TAB>text"),
                kExitBadConfig);
  }
  auto train_texts = data::ReadLabeledTsv(*train);
  if (!train_texts.ok()) return FailWith(train_texts.status());
  std::vector<data::LabeledText> test_texts;
  if (!test->empty()) {
    auto read = data::ReadLabeledTsv(*test);
    if (!read.ok()) return FailWith(read.status());
    test_texts = std::move(*read);
  }
  data::TextCorpusOptions options;
  options.out = *out;
  options.vocab_size = *vocab;
  options.train_files = static_cast<int>(*files);
  options.compression = *compression;
  auto summary = data::WriteTextCorpus(*train_texts, test_texts, options);
  if (!summary.ok()) return FailWith(summary.status());
  for (const std::string& f : summary->files) std::printf("%s\n", f.c_str());
  for (size_t i = 0; i < summary->classes.size(); ++i) {
    std::printf("class %zu %s: %lld train, %lld test\n", i, summary->classes[i].c_str(),
                static_cast<long long>(summary->train_counts[i]),
                static_cast<long long>(summary->test_counts[i]));
  }
  std::printf(
      "%lld words in vocab.txt; %.1f%% of the test words are out of vocabulary; read "
      "them with feature { name: \"tokens\" type: \"int64\" max_len: 200 vocabulary: "
      "%lld } and --data_dir=%s\n",
      static_cast<long long>(summary->vocabulary), 100 * summary->test_oov_share,
      static_cast<long long>(summary->vocabulary + 2), out->c_str());
  return kExitOk;
}

// The synthetic click data set (data/click_data.h).
int Clicks(CliArgs& args) {
  data::ClickDataOptions options;
  auto train = args.GetIntInRange("train_examples", options.train_examples, 1000, 1000000000);
  auto test = args.GetIntInRange("test_examples", options.test_examples, 100, 1000000000);
  auto files = args.GetIntInRange("files", options.train_files, 1, 99999);
  auto seed = args.GetIntInRange("seed", 1, 0, int64_t{1} << 62);
  auto compression = CompressionFlag(args);
  for (const absl::Status& s :
       {train.status(), test.status(), files.status(), seed.status(), compression.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  options.out = *out;
  options.train_examples = *train;
  options.test_examples = *test;
  options.train_files = static_cast<int>(*files);
  options.seed = static_cast<uint64_t>(*seed);
  options.compression = *compression;
  auto summary = data::WriteClickData(options);
  if (!summary.ok()) return FailWith(summary.status());
  for (const std::string& f : summary->files) std::printf("%s\n", f.c_str());
  std::printf(
      "click rate %.4f (train), %.4f (test); the generating model's test AUC %.4f, log loss "
      "%.4f: train configs/click_model.pbtxt with --data_dir=%s\n",
      summary->train_click_rate, summary->test_click_rate, summary->true_test_auc,
      summary->true_test_log_loss, out->c_str());
  return kExitOk;
}

int Shard(CliArgs& args) {
  auto data_dir = args.GetString("data_dir", "/usr/share/datasets/fashion-mnist");
  auto files = args.GetInt("files", 0);
  for (const absl::Status& s : {data_dir.status(), files.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  if (*files < 1) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--files=", *files, ": must be at least 1")),
        kExitBadConfig);
  }
  auto counts = data::WriteShardedCopy(*data_dir, *out, static_cast<int>(*files));
  if (!counts.ok()) return FailWith(counts.status());
  for (size_t i = 0; i < counts->size(); ++i) {
    std::printf("%s/train-*-idx*-ubyte-%05zu-of-%05zu.gz: %lld examples\n", out->c_str(), i,
                counts->size(), static_cast<long long>((*counts)[i]));
  }
  std::printf("%s/t10k-*-idx*-ubyte.gz: the test split, one file\n", out->c_str());
  return kExitOk;
}

}  // namespace

int DataMain(CliArgs& args) {
  const std::string what = args.positional().size() == 2 ? args.positional()[1] : "";
  if (what == "shard") return Shard(args);
  if (what == "to-tfrecord") return IdxToTfRecord(args);
  if (what == "to-csv") return IdxToCsv(args);
  if (what == "csv-to-tfrecord") return CsvToTfRecord(args);
  if (what == "text-to-tfrecord") return TextToTfRecord(args);
  if (what == "debian-descriptions") return DebianDescriptionsMain(args);
  if (what == "clicks") return Clicks(args);
  return Fail(absl::InvalidArgumentError(kUsage), kExitBadConfig);
}

}  // namespace pstrain
