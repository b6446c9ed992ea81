// A small labelled text corpus for the text models' tests.
#ifndef PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_
#define PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::testing {

// `n` lines "classL<TAB>text" (L in 0..3) drawn from `seed`: 20 to 59
// filler words of 300, three of them replaced by words of the class's own
// eight ("topicLwordK"), so a model that finds those words learns the class.
std::string KeywordTexts(int n, uint64_t seed);

// The text models' small corpus as TFRecord files under `dir`/data (4,000
// training lines, 200 test lines, a vocabulary of 500 words plus padding
// and unknown: token ids below 502): that directory.
absl::StatusOr<std::string> WriteKeywordCorpus(const std::string& dir);

// A model config's input block for that corpus: 64 tokens per example.
inline constexpr char kKeywordCorpusInput[] = R"pb(
  input {
    format: "tfrecord"
    train_files: "train-*.tfrecord.gz"
    test_files: "test-*.tfrecord.gz"
    feature { name: "tokens" type: "int64" max_len: 64 vocabulary: 502 }
    label: "label"
  }
)pb";

// The seeds' text CNN after its embedding (Reuters tutorial: conv1d -> pool
// -> conv1d -> pool -> flatten -> dense), for the corpus's four classes.
inline constexpr char kSeedsTextCnnLayers[] = R"pb(
  layer { conv1d { filters: 64 kernel_size: 5 activation: "relu" } }
  layer { max_pool1d { pool_size: 2 } }
  layer { conv1d { filters: 32 kernel_size: 3 activation: "relu" } }
  layer { max_pool1d { pool_size: 2 } }
  layer { flatten {} }
  layer { dense { units: 4 } }
)pb";

}  // namespace pstrain::testing

#endif  // PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_
