#include "data/debian_corpus_build.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

using ::testing::HasSubstr;

// Index files as apt keeps them (uncompressed here): 60 packages in
// "libs" and "games", one with no description.
void WriteIndexes(const std::string& dir) {
  std::string packages, translations;
  for (int i = 0; i < 60; ++i) {
    absl::StrAppend(&packages, "Package: pkg", i, "\nVersion: 1\nSection: ",
                    i % 3 == 0 ? "games" : "contrib/libs", "\n\n");
    if (i == 7) continue;
    absl::StrAppend(&translations, "Package: pkg", i, "\nDescription-md5: 0\nDescription-en: ",
                    i % 3 == 0 ? "a game to play" : "a shared library", " number ", i,
                    "\n long text\n .\n more\n\n");
  }
  ASSERT_OK(WriteFileAtomically(dir + "/Packages", packages));
  ASSERT_OK(WriteFileAtomically(dir + "/Translation-en", translations));
}

TEST(DebianCorpusBuildTest, GivenIndexFilesBecomeACorpusWithItsReadme) {
  const std::string dir = pstrain::testing::FreshTempDir("build");
  WriteIndexes(dir);
  DebianCorpusBuildOptions options;
  options.out = dir + "/corpus";
  options.packages = dir + "/Packages";
  options.translations = dir + "/Translation-en";
  options.min_class = 1;
  options.vocab_size = 50;
  options.train_files = 2;
  options.compression = Compression::kNone;
  ASSERT_OK_AND_ASSIGN(const std::string readme, BuildDebianDescriptions(options));
  EXPECT_THAT(readme, HasSubstr("59 packages with a section and an English description (1 "
                                "without one are left out)"));
  EXPECT_THAT(readme, HasSubstr("| 0 | games |"));
  EXPECT_THAT(readme, HasSubstr("| 1 | libs |"));
  EXPECT_THAT(readme, HasSubstr("| | all 2 | "));
  EXPECT_EQ(ReadFile(options.out + "/README.md").value_or(""), readme);
  EXPECT_EQ(ReadFile(options.out + "/labels.txt").value_or(""), "games\nlibs\n");
  EXPECT_TRUE(std::filesystem::exists(options.out + "/vocab.txt"));
  EXPECT_TRUE(std::filesystem::exists(options.out + "/train-00000-of-00002.tfrecord"));
  EXPECT_FALSE(std::filesystem::exists(options.out + "/.apt"));  // scratch removed
}

TEST(DebianCorpusBuildTest, BadOptionsAndBrokenIndexesAreNamed) {
  const std::string dir = pstrain::testing::FreshTempDir("bad");
  WriteIndexes(dir);
  DebianCorpusBuildOptions options;
  options.out = dir + "/corpus";
  options.packages = dir + "/Packages";
  absl::StatusOr<std::string> one = BuildDebianDescriptions(options);
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(one.status().message(), HasSubstr("give both --packages and --translations"));
  options.out.clear();
  EXPECT_THAT(BuildDebianDescriptions(options).status().message(), HasSubstr("--out=DIR"));

  ASSERT_OK(WriteFileAtomically(dir + "/Broken", "Version: 1\n"));
  options.out = dir + "/corpus";
  options.packages = dir + "/Broken";
  options.translations = dir + "/Translation-en";
  absl::StatusOr<std::string> broken = BuildDebianDescriptions(options);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(broken.status().message(),
              HasSubstr(dir + "/Broken: the paragraph at line 1 has no Package field"));
  EXPECT_FALSE(std::filesystem::exists(options.out + "/README.md"));
}

}  // namespace
}  // namespace pstrain::data
