// A small labelled text corpus for the text models' tests.
#ifndef PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_
#define PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_

#include <cstdint>
#include <string>

namespace pstrain::testing {

// `n` lines "classL<TAB>text" (L in 0..3) drawn from `seed`: 20 to 59
// filler words of 300, three of them replaced by words of the class's own
// eight ("topicLwordK"), so a model that finds those words learns the class.
std::string KeywordTexts(int n, uint64_t seed);

}  // namespace pstrain::testing

#endif  // PSTRAIN_TESTS_TESTING_KEYWORD_TEXTS_H_
