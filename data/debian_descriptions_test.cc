#include "data/debian_descriptions.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/testing/status_testing.h"
#include "data/feature_spec.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

TEST(DebianDescriptionsTest, ParsesSectionsAndLongDescriptions) {
  absl::flat_hash_map<std::string, std::string> sections;
  ASSERT_OK(ParsePackagesIndex(
      "Package: 0ad\nVersion: 1\nSection: games\nDescription: Real-time strategy\n"
      "Description-md5: d9\n\nPackage: nvidia-x\r\nSection: contrib/libs\r\n\r\n"
      "Package: nosection\nVersion: 2\n\n\nPackage: 0ad\nSection: web\n",
      &sections));
  EXPECT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections["0ad"], "games");
  EXPECT_EQ(sections["nvidia-x"], "libs");

  absl::flat_hash_map<std::string, std::string> descriptions;
  ASSERT_OK(ParseTranslationIndex(
      "Package: 0ad\nDescription-md5: d9\nDescription-en: Real-time strategy game\n"
      " 0 A.D. is a game.\n .\n It is free.\n\nPackage: tiny\nDescription-en: Short only\n",
      &descriptions));
  EXPECT_EQ(descriptions["0ad"], "Real-time strategy game\n0 A.D. is a game.\n\nIt is free.");
  EXPECT_EQ(descriptions["tiny"], "Short only");

  EXPECT_EQ(ParsePackagesIndex("Version: 1\n", &sections).message(),
            "the paragraph at line 1 has no Package field");
  EXPECT_EQ(ParseTranslationIndex("\nPackage: a\n", &descriptions).message(),
            "the paragraph at line 2 lacks a Package or Description-en field");
  EXPECT_EQ(ParseTranslationIndex(" orphan\n", &descriptions).message(),
            "line 1: a continuation line with no field before it");
  EXPECT_EQ(ParsePackagesIndex("Package: a\nno colon here\n", &sections).message(),
            "line 2: \"no colon here\" is no field");
}

TEST(DebianDescriptionsTest, SplitsByNameHashAndMergesSmallSections) {
  absl::flat_hash_map<std::string, std::string> sections, descriptions;
  for (int i = 0; i < 300; ++i) {
    const std::string name = absl::StrCat("pkg", i);
    sections[name] = i < 200 ? "libs" : i < 290 ? "games" : "zope";
    if (i != 7) descriptions[name] = absl::StrCat("package number ", i);
  }
  DebianCorpusOptions options;
  options.min_class = 50;
  DebianCorpus corpus = BuildDebianCorpus(sections, descriptions, options);
  EXPECT_EQ(corpus.packages, 299);
  EXPECT_EQ(corpus.without_description, 1);
  EXPECT_EQ(corpus.merged, (std::vector<std::pair<std::string, int64_t>>{{"zope", 10}}));
  EXPECT_EQ(corpus.train.size() + corpus.test.size(), 299u);
  int64_t want_test = 0, others = 0;
  for (int i = 0; i < 300; ++i) {
    if (i != 7 && StableHash(absl::StrCat("pkg", i)) % 100 < 20) ++want_test;
  }
  EXPECT_EQ(static_cast<int64_t>(corpus.test.size()), want_test);
  for (const auto* split : {&corpus.train, &corpus.test}) {
    for (const LabeledText& t : *split) {
      const int i = std::stoi(t.text.substr(15));
      EXPECT_EQ(t.label, i < 200 ? "libs" : i < 290 ? "games" : "other") << t.text;
      others += t.label == "other";
    }
  }
  EXPECT_EQ(others, 10);
  // The same input gives the same corpus, in the same order.
  DebianCorpus again = BuildDebianCorpus(sections, descriptions, options);
  ASSERT_EQ(again.train.size(), corpus.train.size());
  for (size_t k = 0; k < corpus.train.size(); ++k)
    EXPECT_EQ(again.train[k].text, corpus.train[k].text);
}

}  // namespace
}  // namespace pstrain::data
