#include "cli/data_tool.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "cli/debian_corpus.h"
#include "data/click_data.h"
#include "data/convert.h"
#include "data/dataset.h"
#include "data/input.h"
#include "data/record_survey.h"
#include "data/text_corpus.h"
#include "data/tfds_writer.h"
#include "data/tfrecord.h"
#include "model/model_config.h"

namespace pstrain {
namespace {

constexpr char kUsage[] =
    "usage: pstrain data shard --data_dir=DIR --out=DIR --files=N\n"
    "       pstrain data to-tfrecord --data_dir=DIR --out=DIR [--files=N] "
    "[--compression=GZIP|NONE] [--image_encoding=floats|raw|png|jpeg]\n"
    "       pstrain data to-csv --data_dir=DIR --out=DIR\n"
    "       pstrain data to-tfds --out=DIR [--data_dir=DIR] [--size=N] [--spread=N] "
    "[--shards=N] [--seed=N]\n"
    "       pstrain data csv-to-tfrecord --model_config=FILE --out=DIR [--data_dir=DIR] "
    "[--compression=GZIP|NONE] [--skip_bad_records]\n"
    "       pstrain data text-to-tfrecord --train=FILE [--test=FILE] --out=DIR "
    "[--vocab_size=N] [--files=N] [--compression=GZIP|NONE]\n"
    "       pstrain data debian-descriptions --out=DIR [--vocab_size=N] [--files=N] "
    "[--min_class=N] [--compression=GZIP|NONE] [--packages=FILE --translations=FILE]\n"
    "       pstrain data clicks --out=DIR [--train_examples=N] [--test_examples=N] "
    "[--files=N] [--seed=N] [--compression=GZIP|NONE]\n"
    "       pstrain data inspect --files=PATTERN [--data_dir=DIR] [--records=N]";

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
    case data::ImageEncoding::kJpeg:
      std::printf(
          "features: image (a 28x28 grayscale JPEG), label (int64); "
          "configs/fashion_mnist_jpeg.pbtxt reads them with --data_dir=%s\n",
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

// A TensorFlow Datasets directory of JPEG photos from the IDX files
// (data/tfds_writer.h): the stand-in for cats_vs_dogs.
int IdxToTfds(CliArgs& args) {
  data::TfdsWriteOptions options;
  auto data_dir = args.GetString("data_dir", "/usr/share/datasets/fashion-mnist");
  auto size = args.GetIntInRange("size", options.size, 8, 4096);
  auto spread = args.GetIntInRange("spread", options.spread, 0, 4092);
  auto shards = args.GetIntInRange("shards", options.shards, 1, 99999);
  auto seed = args.GetIntInRange("seed", 1, 0, int64_t{1} << 62);
  for (const absl::Status& s :
       {data_dir.status(), size.status(), spread.status(), shards.status(), seed.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  auto out = OutFlag(args);
  if (!out.ok()) return Fail(out.status(), kExitBadConfig);
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  options.size = *size;
  options.spread = *spread;
  options.shards = static_cast<int>(*shards);
  options.seed = static_cast<uint64_t>(*seed);
  auto written = data::WriteIdxAsTfds(*data_dir, *out, options);
  if (!written.ok()) return FailWith(written.status());
  int64_t total = 0;
  for (size_t i = 0; i < written->files.size(); ++i) {
    std::printf("%s: %lld examples\n", written->files[i].c_str(),
                static_cast<long long>(written->shard_lengths[i]));
    total += written->shard_lengths[i];
  }
  std::printf(
      "%s: a TensorFlow Datasets directory, split train (%lld RGB JPEG images, %lld to %lld "
      "pixels a side; the training images, then the test images from example 60000); "
      "configs/fashion_mnist_tfds.pbtxt reads it with --data_dir=%s\n",
      written->dir.c_str(), static_cast<long long>(total),
      static_cast<long long>(written->min_side), static_cast<long long>(written->max_side),
      written->dir.c_str());
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

// "A" when a == b, else "A..B".
template <typename T>
std::string Span(T a, T b) {
  return a == b ? absl::StrCat(a) : absl::StrCat(a, "..", b);
}

int Inspect(CliArgs& args) {
  auto files = args.GetString("files", "");
  auto data_dir = args.GetString("data_dir", "");
  auto records = args.GetInt("records", 1000);
  for (const absl::Status& s : {files.status(), data_dir.status(), records.status()}) {
    if (!s.ok()) return Fail(s, kExitBadConfig);
  }
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s, kExitBadConfig);
  if (files->empty()) {
    return Fail(absl::InvalidArgumentError(
                    "--files=PATTERN is missing: the TFRecord files to read (a glob)"),
                kExitBadConfig);
  }
  if (*records < 1) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--records=", *records, ": must be 1 or more")),
        kExitBadConfig);
  }
  absl::StatusOr<std::string> text = InspectRecords(*files, *data_dir, *records);
  if (!text.ok()) return FailWith(text.status());
  std::fputs(text->c_str(), stdout);
  return kExitOk;
}

}  // namespace

absl::StatusOr<std::string> InspectRecords(const std::string& pattern, const std::string& data_dir,
                                           int64_t max_records) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, data::ExpandFiles(pattern, data_dir));
  PSTRAIN_ASSIGN_OR_RETURN(data::RecordSurvey survey, data::SurveyRecords(files, max_records));
  std::string out = absl::StrFormat(
      "%d of %d files, %d records read%s\n", survey.files.size(), files.size(), survey.records,
      survey.records == max_records ? absl::StrCat(" (the first ", max_records, ": --records)")
                                    : "");
  absl::StrAppend(&out, absl::StrFormat("%-20s %-11s %-17s %s\n", "feature", "list",
                                        "values/example", "contents"));
  for (const data::FeatureSurvey& f : survey.features) {
    std::string contents;
    if (f.mixed_kinds) {
      contents = "different list kinds in different examples";
    } else if (f.kind == data::ListKind::kBytes && f.all_png) {
      contents = f.png_same_shape ? absl::StrFormat("PNG %dx%dx%d (%d values)", f.png.height,
                                                    f.png.width, f.png.channels, f.png.values())
                                  : std::string("PNG images of different shapes");
    } else if (f.kind == data::ListKind::kBytes) {
      contents = f.max_values == 1 && f.min_values == 1
                     ? absl::StrCat(Span(f.min_bytes, f.max_bytes), " bytes")
                     : std::string("strings");
    } else if (f.values > 0) {
      contents =
          absl::StrCat(Span(f.min_value, f.max_value),
                       f.kind == data::ListKind::kFloat && f.integral ? " (whole numbers)" : "");
    }
    if (f.examples < survey.records) {
      absl::StrAppend(&contents,
                      absl::StrFormat("; in %d of %d records", f.examples, survey.records));
    }
    absl::StrAppend(&out, absl::StrFormat("%-20s %-11s %-17s %s\n", f.name,
                                          f.mixed_kinds ? "mixed" : data::ListKindName(f.kind),
                                          Span(f.min_values, f.max_values), contents));
  }
  // The test files' pattern: the training one's with "train" as "test".
  std::string test_files;
  if (const size_t at = pattern.rfind("train"); at != std::string::npos) {
    test_files = pattern;
    test_files.replace(at, 5, "test");
  }
  absl::StrAppend(&out, "\nan input block that reads them (check the lines marked #):\n",
                  data::SuggestInputBlock(survey, pattern, test_files));
  return out;
}

int DataMain(CliArgs& args) {
  const std::string what = args.positional().size() == 2 ? args.positional()[1] : "";
  if (what == "shard") return Shard(args);
  if (what == "to-tfrecord") return IdxToTfRecord(args);
  if (what == "to-csv") return IdxToCsv(args);
  if (what == "to-tfds") return IdxToTfds(args);
  if (what == "csv-to-tfrecord") return CsvToTfRecord(args);
  if (what == "text-to-tfrecord") return TextToTfRecord(args);
  if (what == "debian-descriptions") return DebianDescriptionsMain(args);
  if (what == "clicks") return Clicks(args);
  if (what == "inspect") return Inspect(args);
  return Fail(absl::InvalidArgumentError(kUsage), kExitBadConfig);
}

}  // namespace pstrain
