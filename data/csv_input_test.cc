#include "data/csv_input.h"

#include <set>
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

std::string Dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  EXPECT_OK(MakeDirs(dir));
  return dir;
}

void Write(const std::string& path, absl::string_view text) {
  ASSERT_OK(WriteFileAtomically(path, text));
}

FeatureDef Float(const std::string& name, int64_t length = 1) {
  FeatureDef f;
  f.name = name;
  f.length = length;
  return f;
}

InputSpec Csv(const std::string& train, std::vector<FeatureDef> features) {
  InputSpec in;
  EXPECT_OK(SetInputFormat("csv", &in));
  in.train_files = train;
  in.features.features = std::move(features);
  return in;
}

TEST(CsvInputTest, DecodesEveryKindOfColumn) {
  const std::string dir = Dir("kinds");
  Write(dir + "/colors.txt", "red\ngreen\n");
  Write(dir + "/words.txt", "hello\nworld\nhere\n");
  Write(dir + "/train.csv",
        "id,label,x1,x2,color,count,text\n"
        "0,1,0.5,-2,red,7,\"Hello, world! Hello\"\n"
        "1,0,,3e1,blue,,\n"
        "2,2.0,1,2,,12,unknown words here now\n");
  FeatureDef x = Float("x", 2);
  x.column = "x1";
  x.has_default = true;
  x.default_value = 9;
  FeatureDef color;
  color.name = "color";
  color.type = FeatureType::kString;
  color.vocabulary_file = "colors.txt";
  FeatureDef count;
  count.name = "count";
  count.type = FeatureType::kInt64;
  count.vocabulary = 100;
  count.has_default = true;
  count.default_value = 4;
  FeatureDef text;
  text.name = "text";
  text.type = FeatureType::kString;
  text.max_len = 3;
  text.vocabulary_file = "words.txt";
  ASSERT_OK_AND_ASSIGN(Dataset ds, LoadInputSplit(dir, Csv("*.csv", {x, color, count, text}),
                                                  Split::kTrain, /*num_classes=*/3));
  ASSERT_EQ(ds.num_examples, 3);
  EXPECT_EQ(ds.features, (std::vector<float>{0.5, -2, 9, 30, 1, 2}));
  // color, count, text's three words: red 2, blue (unknown) 1, empty 0;
  // hello 2, world 3, here 4, unknown 1, padding 0.
  EXPECT_EQ(ds.ids, (std::vector<int64_t>{2, 7, 2, 3, 2,  //
                                          1, 4, 0, 0, 0,  //
                                          0, 12, 1, 1, 4}));
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{1, 0, 2}));
}

// A text column padded and cut at the front, as Keras's pad_sequences
// does by default.
TEST(CsvInputTest, ATextColumnIsPaddedAndCutAtTheFrontWhenAsked) {
  const std::string dir = Dir("pre");
  Write(dir + "/words.txt", "hello\nworld\nhere\n");  // ids 2, 3, 4
  Write(dir + "/train.csv", "label,text\n1,hello world here hello\n0,here\n");
  FeatureDef text;
  text.name = "text";
  text.type = FeatureType::kString;
  text.max_len = 3;
  text.vocabulary_file = "words.txt";
  text.pad_front = true;
  text.truncate_front = true;
  ASSERT_OK_AND_ASSIGN(Dataset ds,
                       LoadInputSplit(dir, Csv("train.csv", {text}), Split::kTrain, 2));
  EXPECT_EQ(ds.ids, (std::vector<int64_t>{3, 4, 2,  // the last three words
                                          0, 0, 4}));
}

// The error loading a file of `rows` under a header "label,x,tag".
std::string LoadError(const std::string& name, const std::string& rows) {
  const std::string dir = Dir(name);
  Write(dir + "/data.csv", "label,x,tag\n" + rows);
  FeatureDef tag;
  tag.name = "tag";
  tag.type = FeatureType::kInt64;
  tag.vocabulary = 10;
  absl::StatusOr<Dataset> ds =
      LoadInputSplit(dir, Csv("data.csv", {Float("x"), tag}), Split::kTrain, /*num_classes=*/3);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss) << ds.status();
  const std::string prefix = dir + "/data.csv ";
  const std::string message(ds.status().message());
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

TEST(CsvInputTest, NamesABadRowByItsLine) {
  EXPECT_EQ(LoadError("count", "0,1,2\n1,2\n"), "line 3: 2 fields where there are 3 columns");
  EXPECT_EQ(LoadError("number", "0,1,2\n\n1,abc,2\n"),
            "line 4: column \"x\" is \"abc\", not a finite number");
  EXPECT_EQ(LoadError("nan", "0,nan,2\n"), "line 2: column \"x\" is \"nan\", not a finite number");
  EXPECT_EQ(LoadError("empty", "0,,2\n"),
            "line 2: column \"x\" is empty and feature \"x\" has no default_value");
  EXPECT_EQ(LoadError("integer", "0,1,2.5\n"), "line 2: column \"tag\" is \"2.5\", not an integer");
  EXPECT_EQ(LoadError("vocabulary", "0,1,10\n"),
            "line 2: column \"tag\": feature \"tag\": id 10 is outside its vocabulary [0, 10)");
  EXPECT_EQ(LoadError("label", "cat,1,2\n"),
            "line 2: label column \"label\" is \"cat\", not a class number");
  EXPECT_EQ(LoadError("classes", "3,1,2\n"),
            "line 2: label column \"label\" is 3, outside the classes [0, 3)");
  EXPECT_EQ(LoadError("quote", "0,\"1\"x,2\n"),
            "line 2: field 2: text after its closing quote (\"x\")");
  EXPECT_EQ(LoadError("open", "0,1,2\n1,\"2,\n3\n"),
            "line 3: a quoted field is not closed before the end of the file");
}

TEST(CsvInputTest, SkipBadRecordsCountsBadRows) {
  const std::string dir = Dir("skip");
  Write(dir + "/a.csv", "label,x\n0,1\n1\n1,2\n2,zz\n0,\"3\"\n");
  InputSpec in = Csv("a.csv", {Float("x")});
  in.skip_bad_records = true;
  ASSERT_OK_AND_ASSIGN(ReplicaData data, LoadInput(dir, in, Split::kTrain, 0, 1, 3));
  EXPECT_EQ(data.skipped_records, 2);
  EXPECT_EQ(data.dataset.features, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(data.dataset.labels, (std::vector<int32_t>{0, 1, 0}));
}

TEST(CsvInputTest, ColumnsFromAListOrEveryFilesSameHeader) {
  const std::string dir = Dir("columns");
  Write(dir + "/a.tsv", "1\t\"2\"\t0.5\n");
  InputSpec in = Csv("a.tsv", {Float("x", 2)});
  ASSERT_OK(SetInputFormat("tsv", &in));
  in.csv.header = false;
  in.csv.columns = {"label", "x", "y"};
  in.features.features[0].column = "y";
  EXPECT_EQ(LoadInputSplit(dir, in, Split::kTrain, 2).status().message(),
            "feature \"x\": length 2 from column \"y\" runs past the last of the 3 columns");
  in.features.features[0].column = "";
  // No quoting in TSV: "2" is a quote, a digit and a quote.
  EXPECT_EQ(LoadInputSplit(dir, in, Split::kTrain, 2).status().message(),
            dir + "/a.tsv line 1: column \"x\" is \"\"2\"\", not a finite number");

  Write(dir + "/b-1.csv", "label,x\n1,2\n");
  Write(dir + "/b-2.csv", "label,y\n1,2\n");
  EXPECT_EQ(
      LoadInputSplit(dir, Csv("b-*.csv", {Float("x")}), Split::kTrain, 2).status().message(),
      dir + "/b-2.csv line 1: the header (label, y) is not that of " + dir + "/b-1.csv (label, x)");
  EXPECT_EQ(LoadInputSplit(dir, Csv("b-1.csv", {Float("z")}), Split::kTrain, 2).status().message(),
            "feature \"z\": no column is named \"z\" in the header of " + dir + "/b-1.csv");
  InputSpec no_label = Csv("b-1.csv", {Float("x")});
  no_label.features.label = "class";
  EXPECT_EQ(LoadInputSplit(dir, no_label, Split::kTrain, 2).status().message(),
            "label \"class\": no column is named so in the header of " + dir + "/b-1.csv");
  Write(dir + "/empty.csv", "\n\n");
  EXPECT_EQ(
      LoadInputSplit(dir, Csv("empty.csv", {Float("x")}), Split::kTrain, 2).status().message(),
      dir + "/empty.csv is empty: it has no header row naming the columns");
  FeatureDef text = Float("x");
  text.max_len = 4;
  EXPECT_EQ(LoadInputSplit(dir, Csv("b-1.csv", {text}), Split::kTrain, 2).status().message(),
            "feature \"x\": max_len is for a string column of text (split into words); a CSV cell "
            "holds one number, so give length: N to read N columns");
}

// Example i of a set: label i % 3, x = i.
std::string WriteNumbered(const std::string& name, int files, int per_file) {
  const std::string dir = Dir(name);
  for (int f = 0; f < files; ++f) {
    std::string text = "x,label\n";
    for (int i = f * per_file; i < (f + 1) * per_file; ++i) {
      absl::StrAppend(&text, i, ",", i % 3, "\n");
    }
    Write(absl::StrFormat("%s/part-%d.csv", dir, f), text);
  }
  return dir;
}

TEST(CsvInputTest, ShardsAndStreamsAsTfRecordFilesDo) {
  for (const auto& [files, replicas, buffer] :
       {std::tuple{4, 2, 0}, std::tuple{1, 3, 0}, std::tuple{4, 2, 5}, std::tuple{1, 3, 4}}) {
    const std::string dir =
        WriteNumbered(absl::StrFormat("shard-%d-%d-%d", files, replicas, buffer), files, 6);
    InputSpec in = Csv("part-*.csv", {Float("x")});
    in.shuffle_buffer = buffer;
    std::multiset<int> all;
    for (int r = 0; r < replicas; ++r) {
      ASSERT_OK_AND_ASSIGN(TrainingInput input,
                           OpenTrainingInput(dir, in, r, replicas, 1, /*seed=*/3, 3));
      EXPECT_EQ(input.streamed, buffer > 0);
      EXPECT_EQ(input.by_file, files >= replicas);
      EXPECT_EQ(input.split_examples, files * 6);
      for (int64_t b = 0; b < input.source->batches_per_epoch(); ++b) {
        float x;
        int32_t y;
        ASSERT_OK_AND_ASSIGN(int64_t epoch, input.source->Next(&x, &y));
        EXPECT_EQ(epoch, 0);
        EXPECT_EQ(y, static_cast<int>(x) % 3);
        all.insert(static_cast<int>(x));
      }
    }
    std::multiset<int> want;
    for (int i = 0; i < files * 6; ++i) want.insert(i);
    EXPECT_EQ(all, want) << files << " files, " << replicas << " replicas, buffer " << buffer;
  }
}

}  // namespace
}  // namespace pstrain::data
