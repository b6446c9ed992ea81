#include "data/click_data.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/input.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

std::string Path(const std::string& name) { return testing::TempDir() + "/" + name; }

TEST(ClickDataTest, ExactAucCountsOrderedPairsAndTies) {
  // Positives at 0.9, 0.5; negatives at 0.1, 0.5, 0.95: of 6 pairs, 0.9
  // beats 0.1 and 0.5, 0.5 beats 0.1 and ties 0.5: 3.5 / 6.
  EXPECT_DOUBLE_EQ(ExactAuc({0.9, 0.5, 0.1, 0.5, 0.95}, {1, 1, 0, 0, 0}), 3.5 / 6);
  EXPECT_DOUBLE_EQ(ExactAuc({0.2, 0.1}, {1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(ExactAuc({0.2, 0.1}, {1, 1}), 0.5);
}

TEST(ClickDataTest, TheModelRanksClicksAndTheIdsFollowZipf) {
  const ClickModel model(7);
  uint64_t state = 3;
  const std::vector<ClickFeature>& features = ClickFeatures();
  ASSERT_EQ(features.size(), 8u);
  std::vector<int64_t> ids(features.size());
  int64_t first_user = 0, second_user = 0;
  for (int k = 0; k < 20000; ++k) {
    model.DrawIds(&state, ids.data());
    for (size_t f = 0; f < features.size(); ++f) {
      ASSERT_GE(ids[f], 1);
      ASSERT_LE(ids[f], features[f].vocabulary);
    }
    first_user += ids[0] == 1;
    second_user += ids[0] == 2;
  }
  // P(2) / P(1) = 2^-1.1 = 0.467.
  EXPECT_NEAR(static_cast<double>(second_user) / first_user, 0.467, 0.06);
  // Position 1 beats position 10 on the same ids (a 1.35 smaller logit,
  // give or take the placement term).
  ids = {1, 1, 1, 1, 1, 1, 1, 1};
  const double top = model.Logit(ids.data());
  ids[4] = 10;
  EXPECT_GT(top, model.Logit(ids.data()));
}

TEST(ClickDataTest, WritesExamplesTheInputReadsAndTheTrueAuc) {
  ClickDataOptions options;
  options.out = Path("clicks");
  options.train_examples = 3000;
  options.test_examples = 2000;
  options.train_files = 3;
  ASSERT_OK_AND_ASSIGN(ClickDataSummary summary, WriteClickData(options));
  ASSERT_EQ(summary.files.size(), 5u);
  EXPECT_EQ(summary.files[0], options.out + "/train-00000-of-00003.tfrecord.gz");
  EXPECT_EQ(summary.files[3], options.out + "/test-00000-of-00001.tfrecord.gz");
  EXPECT_GT(summary.test_click_rate, 0.1);
  EXPECT_LT(summary.test_click_rate, 0.4);
  // The generating model ranks its own clicks well above chance.
  EXPECT_GT(summary.true_test_auc, 0.65);
  EXPECT_LT(summary.true_test_auc, 0.9);
  EXPECT_GT(summary.true_test_log_loss, 0.2);
  ASSERT_OK_AND_ASSIGN(std::string readme, ReadFile(options.out + "/README.md"));
  EXPECT_NE(readme.find(absl::StrFormat("AUC %.4f", summary.true_test_auc)), std::string::npos);
  EXPECT_NE(readme.find("feature { name: \"user\" type: \"int64\" vocabulary: 5001 }"),
            std::string::npos);

  // The features as a config names them read every example back.
  InputSpec in;
  ASSERT_OK(SetInputFormat("tfrecord", &in));
  in.train_files = "train-*";
  in.test_files = "test-*";
  for (const ClickFeature& f : ClickFeatures()) {
    FeatureDef def;
    def.name = f.name;
    def.type = FeatureType::kInt64;
    def.vocabulary = f.vocabulary + 1;
    in.features.features.push_back(def);
  }
  ASSERT_OK_AND_ASSIGN(Dataset train, LoadInputSplit(options.out, in, Split::kTrain, 2));
  EXPECT_EQ(train.num_examples, 3000);
  EXPECT_EQ(train.ids_dim, 8);
  ASSERT_OK_AND_ASSIGN(Dataset test, LoadInputSplit(options.out, in, Split::kTest, 2));
  EXPECT_EQ(test.num_examples, 2000);
  int64_t clicks = 0;
  for (int32_t y : test.labels) clicks += y;
  EXPECT_DOUBLE_EQ(static_cast<double>(clicks) / 2000, summary.test_click_rate);
  // The true model's scores of the examples read back give its AUC.
  const ClickModel model(options.seed);
  std::vector<double> scores;
  for (int64_t e = 0; e < test.num_examples; ++e) {
    scores.push_back(model.Logit(test.ids.data() + e * test.ids_dim));
  }
  EXPECT_DOUBLE_EQ(ExactAuc(scores, test.labels), summary.true_test_auc);

  // The same seed writes the same bytes; another seed other ones.
  options.out = Path("clicks_again");
  ASSERT_OK(WriteClickData(options).status());
  options.out = Path("clicks_other");
  options.seed = 2;
  ASSERT_OK(WriteClickData(options).status());
  const std::string name = "/test-00000-of-00001.tfrecord.gz";
  ASSERT_OK_AND_ASSIGN(std::string first, ReadFile(Path("clicks") + name));
  ASSERT_OK_AND_ASSIGN(std::string again, ReadFile(Path("clicks_again") + name));
  ASSERT_OK_AND_ASSIGN(std::string other, ReadFile(Path("clicks_other") + name));
  EXPECT_TRUE(first == again);
  EXPECT_FALSE(first == other);
}

TEST(ClickDataTest, BadOptionsAndAnOccupiedDirectoryAreRefused) {
  ClickDataOptions options;
  options.out = Path("bad");
  options.train_examples = 10;
  EXPECT_EQ(WriteClickData(options).status().message(),
            "train_examples 10 is not in 1000..1000000000");
  options.train_examples = 1000;
  options.test_examples = 5;
  EXPECT_EQ(WriteClickData(options).status().message(),
            "test_examples 5 is not in 100..1000000000");
  options.test_examples = 100;
  options.train_files = 0;
  EXPECT_EQ(WriteClickData(options).status().message(), "train_files 0 is not in 1..1000");
  options.train_files = 1;
  ASSERT_OK(WriteClickData(options).status());
  // A second data set into the same place would mix the two.
  ASSERT_OK_AND_ASSIGN(std::string before, ReadFile(options.out + "/README.md"));
  options.seed = 9;
  EXPECT_EQ(WriteClickData(options).status().message(),
            options.out +
                " already holds test-00000-of-00001.tfrecord.gz: write to a directory without "
                "data files");
  ASSERT_OK_AND_ASSIGN(std::string after, ReadFile(options.out + "/README.md"));
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace pstrain::data
