#include "data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/csv.h"
#include "data/tfrecord.h"
#include "data/tokenize.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

constexpr int64_t kMaxNumericClass = 99999;

// Class ids of the training labels: numbers as they are, else names.
absl::StatusOr<std::vector<std::string>> ClassesOf(const std::vector<LabeledText>& train) {
  int64_t max = -1;
  bool numeric = true;
  for (const LabeledText& t : train) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(t.label, &v) || v < 0 || v > kMaxNumericClass ||
        absl::StrCat(v) != t.label) {
      numeric = false;
      break;
    }
    max = std::max(max, v);
  }
  std::vector<std::string> classes;
  if (numeric) {
    for (int64_t v = 0; v <= max; ++v) classes.push_back(absl::StrCat(v));
    return classes;
  }
  for (const LabeledText& t : train) classes.push_back(t.label);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  return classes;
}

}  // namespace

absl::StatusOr<std::vector<LabeledText>> ReadLabeledTsv(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<CsvReader> reader,
      CsvReader::Open(path, CompressionForPath(path), CsvDialect{'\t', false}));
  std::vector<LabeledText> out;
  std::string line;
  while (true) {
    const int64_t at = reader->offset();
    PSTRAIN_ASSIGN_OR_RETURN(bool more, reader->Next(&line));
    if (!more) return out;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader->Where(at), tab == 0 ? ": the label before the tab is empty"
                                                   : ": no tab between the label and the text"));
    }
    out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
}

std::vector<std::string> BuildVocabulary(const std::vector<LabeledText>& texts, int64_t size) {
  absl::flat_hash_map<std::string, int64_t> counts;
  std::string scratch;
  for (const LabeledText& t : texts) {
    ForEachWord(t.text, &scratch, [&](absl::string_view w) { ++counts[w]; });
  }
  std::vector<std::pair<int64_t, std::string>> ranked;
  ranked.reserve(counts.size());
  for (auto& [word, n] : counts) ranked.emplace_back(-n, word);
  const size_t keep =
      std::min<size_t>(ranked.size(), static_cast<size_t>(std::max<int64_t>(0, size)));
  std::partial_sort(ranked.begin(), ranked.begin() + keep, ranked.end());
  std::vector<std::string> vocabulary;
  for (size_t i = 0; i < keep; ++i) vocabulary.push_back(std::move(ranked[i].second));
  return vocabulary;
}

absl::StatusOr<TextCorpusSummary> WriteTextCorpus(const std::vector<LabeledText>& train,
                                                  const std::vector<LabeledText>& test,
                                                  const TextCorpusOptions& options) {
  if (train.empty()) return absl::InvalidArgumentError("the training split has no texts");
  if (options.vocab_size < 1 || options.vocab_size > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", options.vocab_size, " is not in 1..2^24"));
  }
  if (options.train_files < 1 || options.train_files > std::min<int64_t>(99999, train.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("train_files ", options.train_files, " is not in 1..",
                     std::min<int64_t>(99999, train.size()), " (one text at least per file)"));
  }
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options.out));
  for (const std::string& name :
       {TfRecordSplitPath(options.out, "train", 0, options.train_files, options.compression),
        TfRecordSplitPath(options.out, "test", 0, 1, options.compression)}) {
    if (std::filesystem::exists(name)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, " is there already: write to a directory without a corpus"));
    }
  }
  TextCorpusSummary summary;
  PSTRAIN_ASSIGN_OR_RETURN(summary.classes, ClassesOf(train));
  absl::flat_hash_map<std::string, int64_t> class_ids;
  for (size_t i = 0; i < summary.classes.size(); ++i) class_ids[summary.classes[i]] = i;
  for (const LabeledText& t : test) {
    if (!class_ids.contains(t.label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("test label \"", t.label, "\" is not a class of the training split"));
    }
  }
  const std::vector<std::string> vocabulary = BuildVocabulary(train, options.vocab_size);
  absl::flat_hash_map<std::string, int64_t> ids;
  for (size_t i = 0; i < vocabulary.size(); ++i) ids[vocabulary[i]] = static_cast<int64_t>(i) + 2;
  summary.vocabulary = static_cast<int64_t>(vocabulary.size());
  summary.train_counts.assign(summary.classes.size(), 0);
  summary.test_counts.assign(summary.classes.size(), 0);

  int64_t test_words = 0, test_oov = 0;
  std::string scratch;
  auto write = [&](const std::vector<LabeledText>& texts, size_t begin, size_t end,
                   const std::string& path, std::vector<int64_t>* counts,
                   bool is_test) -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> writer,
                             TfRecordWriter::Open(path, options.compression));
    v1::Example e;
    for (size_t k = begin; k < end; ++k) {
      e.Clear();
      auto& features = *e.mutable_features()->mutable_feature();
      auto* tokens = features["tokens"].mutable_int64_list();
      ForEachWord(texts[k].text, &scratch, [&](absl::string_view w) {
        auto it = ids.find(w);
        tokens->add_value(it == ids.end() ? 1 : it->second);
        if (is_test) {
          ++test_words;
          test_oov += it == ids.end() ? 1 : 0;
        }
      });
      const int64_t label = class_ids.at(texts[k].label);
      features["label"].mutable_int64_list()->add_value(label);
      ++(*counts)[label];
      PSTRAIN_RETURN_IF_ERROR(writer->Write(e.SerializeAsString()));
    }
    PSTRAIN_RETURN_IF_ERROR(writer->Close());
    summary.files.push_back(path);
    return absl::OkStatus();
  };
  const size_t n = train.size();
  const int files = options.train_files;
  for (int i = 0; i < files; ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        write(train, i * n / files, (i + 1) * n / files,
              TfRecordSplitPath(options.out, "train", i, files, options.compression),
              &summary.train_counts, false));
  }
  if (!test.empty()) {
    PSTRAIN_RETURN_IF_ERROR(write(test, 0, test.size(),
                                  TfRecordSplitPath(options.out, "test", 0, 1, options.compression),
                                  &summary.test_counts, true));
  }
  summary.test_oov_share = test_words == 0 ? 0 : static_cast<double>(test_oov) / test_words;
  std::string vocab_text = absl::StrJoin(vocabulary, "\n");
  if (!vocab_text.empty()) vocab_text.push_back('\n');
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(options.out + "/vocab.txt", vocab_text));
  summary.files.push_back(options.out + "/vocab.txt");
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(options.out + "/labels.txt",
                                              absl::StrJoin(summary.classes, "\n") + "\n"));
  summary.files.push_back(options.out + "/labels.txt");
  return summary;
}

}  // namespace pstrain::data
