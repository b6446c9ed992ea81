#include "data/csv.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/tokenize.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

const CsvDialect kCsv{',', true};
const CsvDialect kTsv{'\t', false};

std::vector<std::string> Fields(absl::string_view row, const CsvDialect& dialect = kCsv) {
  CsvRow parsed;
  absl::Status s = parsed.Parse(row, dialect);
  EXPECT_OK(s) << row;
  std::vector<std::string> out;
  for (size_t i = 0; i < parsed.size(); ++i) out.emplace_back(parsed.field(i));
  return out;
}

std::string ParseError(absl::string_view row) {
  CsvRow parsed;
  return std::string(parsed.Parse(row, kCsv).message());
}

std::string Path(const std::string& name) { return testing::TempDir() + "/" + name; }

std::string Write(const std::string& name, absl::string_view text) {
  EXPECT_OK(WriteFileAtomically(Path(name), text));
  return Path(name);
}

// Every row of a file, or its first error.
absl::StatusOr<std::vector<std::string>> Rows(const std::string& path, const CsvDialect& dialect,
                                              std::vector<int64_t>* lines = nullptr,
                                              Compression compression = Compression::kNone) {
  auto reader = CsvReader::Open(path, compression, dialect);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> rows;
  std::string row;
  while (true) {
    const int64_t line = (*reader)->offset();
    absl::StatusOr<bool> more = (*reader)->Next(&row);
    if (!more.ok()) return more.status();
    if (!*more) return rows;
    rows.push_back(row);
    if (lines != nullptr) lines->push_back(line);
  }
}

TEST(CsvRowTest, SplitsPlainFields) {
  EXPECT_EQ(Fields("a,b,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Fields("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(Fields(" 1.5 , x"), (std::vector<std::string>{" 1.5 ", " x"}));
}

TEST(CsvRowTest, QuotedFieldsHoldDelimitersQuotesAndLineEnds) {
  EXPECT_EQ(Fields("\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\"\""),
            (std::vector<std::string>{"a,b", "say \"hi\"", "two\nlines", ""}));
  // A quote inside a field that does not begin with one is a character.
  EXPECT_EQ(Fields("5\" screen,x"), (std::vector<std::string>{"5\" screen", "x"}));
}

TEST(CsvRowTest, NamesTextAfterAClosingQuoteAndAQuoteNotClosed) {
  EXPECT_EQ(ParseError("x,\"a\"b,c"), "field 2: text after its closing quote (\"b\")");
  EXPECT_EQ(ParseError("\"abc"), "field 1: its opening quote is not closed");
}

TEST(CsvRowTest, TsvHasNoQuoting) {
  EXPECT_EQ(Fields("\"a\"\tb,c\t", kTsv), (std::vector<std::string>{"\"a\"", "b,c", ""}));
}

TEST(CsvRowTest, FormatIsParsesInverse) {
  const std::vector<std::vector<std::string>> rows = {
      {"a", "b,c", "\"q\"", "line\nend", "", "\r"}, {""}, {"", ""}, {"x\"y"}};
  for (const auto& fields : rows) {
    ASSERT_OK_AND_ASSIGN(std::string row, FormatCsvRow(fields, kCsv));
    EXPECT_EQ(Fields(row), fields) << row;
  }
  EXPECT_EQ(FormatCsvRow({"a\tb"}, kTsv).status().message(),
            "field 1 holds the delimiter or a line end, which a row without quoting cannot hold");
}

TEST(CsvReaderTest, RowsEndAtLineEndsOutsideQuotes) {
  const std::string path =
      Write("rows.csv", "\xEF\xBB\xBFh1,h2\r\n\r\n1,\"two\nlines\"\n\n\n3,\"x\"\"\"\r\nlast,row");
  std::vector<int64_t> lines;
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> rows, Rows(path, kCsv, &lines));
  EXPECT_EQ(rows,
            (std::vector<std::string>{"h1,h2", "1,\"two\nlines\"", "3,\"x\"\"\"", "last,row"}));
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 3, 7, 8}));
}

TEST(CsvReaderTest, ALoneCarriageReturnAtTheEndIsNoRow) {
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> rows, Rows(Write("cr.csv", "a\n\r"), kCsv));
  EXPECT_EQ(rows, (std::vector<std::string>{"a"}));
  ASSERT_OK_AND_ASSIGN(rows, Rows(Write("cr-only.csv", "\r"), kCsv));
  EXPECT_TRUE(rows.empty());
}

TEST(CsvReaderTest, TsvRowsAreLines) {
  const std::string path = Write("rows.tsv", "1\tsays \"hi\nthere\r\n");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> rows, Rows(path, kTsv));
  EXPECT_EQ(rows, (std::vector<std::string>{"1\tsays \"hi", "there"}));
}

TEST(CsvReaderTest, NamesAQuoteNotClosedByItsLine) {
  const std::string path = Write("open.csv", "a,b\n1,2\n3,\"never\nclosed\n");
  auto reader = CsvReader::Open(path, Compression::kNone, kCsv);
  ASSERT_OK(reader.status());
  std::string row;
  ASSERT_OK_AND_ASSIGN(bool more, (*reader)->Next(&row));
  ASSERT_OK_AND_ASSIGN(more, (*reader)->Next(&row));
  ASSERT_TRUE(more);
  absl::StatusOr<bool> bad = (*reader)->Next(&row);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message(),
            path + " line 3: a quoted field is not closed before the end of the file");
  EXPECT_FALSE((*reader)->can_continue());
  ASSERT_OK_AND_ASSIGN(more, (*reader)->Next(&row));
  EXPECT_FALSE(more);
}

TEST(CsvReaderTest, ReadsGzipAndNamesAStreamCutShort) {
  std::string text = "a,b\n";
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + "," + std::to_string(i * 7) + "\n";
  const std::string path = Path("big.csv.gz");
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), text.size()), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> rows,
                       Rows(path, kCsv, nullptr, Compression::kGzip));
  ASSERT_EQ(rows.size(), 20001u);
  EXPECT_EQ(rows[12346], "12345,86415");

  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  const std::string cut = Write("cut.csv.gz", bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<std::vector<std::string>> partial = Rows(cut, kCsv, nullptr, Compression::kGzip);
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StartsWith(partial.status().message(), cut + " at byte "))
      << partial.status();
  EXPECT_NE(partial.status().message().find(": the GZIP stream is corrupt or cut short"),
            std::string::npos)
      << partial.status();
}

TEST(CsvReaderTest, NamesAMissingFile) {
  EXPECT_EQ(CsvReader::Open(Path("nope.csv"), Compression::kNone, kCsv).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TokenizeTest, LowerCasesAndSplitsOnWhatIsNotALetterOrDigit) {
  EXPECT_EQ(Words("Café-au-lait, 2X!  the_END"),
            (std::vector<std::string>{"café", "au", "lait", "2x", "the", "end"}));
  EXPECT_TRUE(Words(" ,.;").empty());
}

}  // namespace
}  // namespace pstrain::data
