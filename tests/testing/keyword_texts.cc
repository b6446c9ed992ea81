#include "tests/testing/keyword_texts.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "data/text_corpus.h"

namespace pstrain::testing {

std::string KeywordTexts(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng() % 4);
    const int length = 20 + static_cast<int>(rng() % 40);
    std::vector<std::string> words;
    for (int w = 0; w < length; ++w) words.push_back(absl::StrCat("filler", rng() % 300));
    for (int k = 0; k < 3; ++k) {
      words[rng() % words.size()] = absl::StrCat("topic", label, "word", rng() % 8);
    }
    absl::StrAppend(&out, "class", label, "\t", absl::StrJoin(words, " "), "\n");
  }
  return out;
}

absl::StatusOr<std::string> WriteKeywordCorpus(const std::string& dir) {
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(dir + "/train.tsv", KeywordTexts(4000, 1)));
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(dir + "/test.tsv", KeywordTexts(200, 2)));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<data::LabeledText> train,
                           data::ReadLabeledTsv(dir + "/train.tsv"));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<data::LabeledText> test,
                           data::ReadLabeledTsv(dir + "/test.tsv"));
  data::TextCorpusOptions corpus;
  corpus.out = dir + "/data";
  corpus.vocab_size = 500;
  PSTRAIN_RETURN_IF_ERROR(data::WriteTextCorpus(train, test, corpus).status());
  return corpus.out;
}

}  // namespace pstrain::testing
