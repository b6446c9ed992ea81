#include "tests/testing/keyword_texts.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

}  // namespace pstrain::testing
