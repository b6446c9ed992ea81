#include "data/text_corpus.h"

#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/input.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

std::string Path(const std::string& name) { return testing::TempDir() + "/" + name; }

TEST(TextCorpusTest, ReadsLabelTabTextLines) {
  ASSERT_OK(WriteFileAtomically(Path("a.tsv"), "sports\tThe match\tended.\r\n\nnews\t\n"));
  ASSERT_OK_AND_ASSIGN(std::vector<LabeledText> texts, ReadLabeledTsv(Path("a.tsv")));
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0].label, "sports");
  EXPECT_EQ(texts[0].text, "The match\tended.");
  EXPECT_EQ(texts[1].label, "news");
  EXPECT_EQ(texts[1].text, "");
  ASSERT_OK(WriteFileAtomically(Path("b.tsv"), "1\tok\n\nno tab here\n"));
  EXPECT_EQ(ReadLabeledTsv(Path("b.tsv")).status().message(),
            Path("b.tsv") + " line 3: no tab between the label and the text");
  ASSERT_OK(WriteFileAtomically(Path("c.tsv"), "\ttext\n"));
  EXPECT_EQ(ReadLabeledTsv(Path("c.tsv")).status().message(),
            Path("c.tsv") + " line 1: the label before the tab is empty");
}

TEST(TextCorpusTest, VocabularyIsTheMostFrequentWordsTiesBytewise) {
  const std::vector<LabeledText> texts = {{"a", "b a c, B!"}, {"a", "c d a"}, {"b", "e"}};
  // a 3, b 2, c 2, d 1, e 1.
  EXPECT_EQ(BuildVocabulary(texts, 4), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(BuildVocabulary(texts, 100).size(), 5u);
}

TEST(TextCorpusTest, WritesTokenIdsThatTheFeatureSpecReadsBack) {
  const std::vector<LabeledText> train = {{"sports", "Goal! The team wins the cup"},
                                          {"news", "The vote is today"},
                                          {"sports", "the team loses"},
                                          {"arts", "A new film"}};
  const std::vector<LabeledText> test = {{"news", "the team votes today"}};
  TextCorpusOptions options;
  options.out = Path("corpus");
  options.vocab_size = 4;
  options.train_files = 2;
  ASSERT_OK_AND_ASSIGN(TextCorpusSummary summary, WriteTextCorpus(train, test, options));
  EXPECT_EQ(summary.classes, (std::vector<std::string>{"arts", "news", "sports"}));
  EXPECT_EQ(summary.train_counts, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(summary.test_counts, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(summary.vocabulary, 4);
  // "the" 4, "team" 2, then "a", "cup" (1 each, bytewise first).
  ASSERT_OK_AND_ASSIGN(std::string vocab, ReadFile(options.out + "/vocab.txt"));
  EXPECT_EQ(vocab, "the\nteam\na\ncup\n");
  ASSERT_OK_AND_ASSIGN(std::string labels, ReadFile(options.out + "/labels.txt"));
  EXPECT_EQ(labels, "arts\nnews\nsports\n");
  EXPECT_DOUBLE_EQ(summary.test_oov_share, 0.5);  // "votes", "today"

  InputSpec in;
  ASSERT_OK(SetInputFormat("tfrecord", &in));
  in.train_files = "train-*";
  in.test_files = "test-*";
  FeatureDef tokens;
  tokens.name = "tokens";
  tokens.type = FeatureType::kInt64;
  tokens.max_len = 5;
  tokens.vocabulary = 6;
  in.features.features = {tokens};
  ASSERT_OK_AND_ASSIGN(Dataset ds, LoadInputSplit(options.out, in, Split::kTrain, 3));
  ASSERT_EQ(ds.num_examples, 4);
  EXPECT_EQ(std::vector<int64_t>(ds.ids.begin(), ds.ids.begin() + 5),
            (std::vector<int64_t>{1, 2, 3, 1, 2}));  // goal the team wins the
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{2, 1, 2, 0}));
  ASSERT_OK_AND_ASSIGN(ds, LoadInputSplit(options.out, in, Split::kTest, 3));
  EXPECT_EQ(ds.ids, (std::vector<int64_t>{2, 3, 1, 1, 0}));

  // The same texts in a TSV, read with the vocabulary file as a text
  // column, give the same ids.
  ASSERT_OK(WriteFileAtomically(options.out + "/test.tsv", "1\tthe team votes today\n"));
  InputSpec tsv;
  ASSERT_OK(SetInputFormat("tsv", &tsv));
  tsv.csv.header = false;
  tsv.csv.columns = {"label", "text"};
  tsv.train_files = "test.tsv";
  FeatureDef text;
  text.name = "text";
  text.type = FeatureType::kString;
  text.max_len = 5;
  text.vocabulary_file = "vocab.txt";
  tsv.features.features = {text};
  ASSERT_OK_AND_ASSIGN(Dataset from_tsv, LoadInputSplit(options.out, tsv, Split::kTrain, 3));
  EXPECT_EQ(from_tsv.ids, ds.ids);

  EXPECT_EQ(WriteTextCorpus(train, test, options).status().message(),
            options.out +
                "/train-00000-of-00002.tfrecord.gz is there already: write to a "
                "directory without a corpus");
  options.out = Path("corpus2");
  EXPECT_EQ(WriteTextCorpus(train, {{"weather", "rain"}}, options).status().message(),
            "test label \"weather\" is not a class of the training split");
}

TEST(TextCorpusTest, IntegerLabelsAreTheClassIds) {
  TextCorpusOptions options;
  options.out = Path("numeric");
  ASSERT_OK_AND_ASSIGN(TextCorpusSummary summary,
                       WriteTextCorpus({{"2", "x"}, {"0", "y"}}, {}, options));
  EXPECT_EQ(summary.classes, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(summary.train_counts, (std::vector<int64_t>{1, 0, 1}));
}

}  // namespace
}  // namespace pstrain::data
