// CSV and TSV files: the reader's rows, each row's fields, and the decoding
// of a row through a feature spec. The first byte picks the dialect; the
// rest is the file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/csv.h"
#include "data/csv_input.h"
#include "data/tokenize.h"
#include "fuzz/temp_file.h"

namespace {

using pstrain::data::CsvDialect;

// A spec reading columns "a" (two floats), "b" (text, hashed) and "c" (an
// int64 id), label "y".
std::shared_ptr<const pstrain::data::CsvFormat> Format(const CsvDialect& dialect,
                                                       const std::string& path) {
  pstrain::data::FeatureSpec spec;
  pstrain::data::FeatureDef a, b, c;
  a.name = "a";
  a.length = 2;
  a.has_default = true;
  b.name = "b";
  b.type = pstrain::data::FeatureType::kString;
  b.max_len = 4;
  b.hash_buckets = 100;
  c.name = "c";
  c.type = pstrain::data::FeatureType::kInt64;
  c.vocabulary = 50;
  spec.features = {a, b, c};
  spec.label = "y";
  pstrain::data::CsvOptions options;
  options.dialect = dialect;
  options.header = false;
  options.columns = {"y", "a", "a2", "b", "c"};
  auto decoder = pstrain::data::ExampleDecoder::Create(spec);
  if (!decoder.ok()) __builtin_trap();
  auto format = pstrain::data::CsvFormat::Create(options, std::move(*decoder), path,
                                                 pstrain::data::Compression::kNone);
  if (!format.ok()) __builtin_trap();
  return *format;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char kDelimiters[] = {',', ';', '\t', '|'};
  const CsvDialect dialect{kDelimiters[data[0] & 3], (data[0] & 4) == 0};
  const std::string path = pstrain::fuzz::WriteTemp(data + 1, size - 1);
  auto reader = pstrain::data::CsvReader::Open(path, pstrain::data::Compression::kNone, dialect);
  if (!reader.ok()) __builtin_trap();
  // One format per dialect, made once (no file is read: the columns are given).
  static std::shared_ptr<const pstrain::data::CsvFormat> formats[8];
  auto& format = formats[data[0] & 7];
  if (format == nullptr) format = Format(dialect, path);
  pstrain::data::CsvRow row, again;
  std::string text, word;
  float dense[2];
  int64_t ids[5];
  int32_t label;
  int64_t line = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t at = (*reader)->offset();
    auto more = (*reader)->Next(&text);
    if (!more.ok()) {
      if ((*reader)->can_continue()) __builtin_trap();  // every reader error ends the file
      break;
    }
    if (!*more) break;
    // Rows begin on later lines, and hold no line end outside quotes.
    if (at <= line || text.empty()) __builtin_trap();
    line = at;
    if (!row.Parse(text, dialect).ok()) continue;
    // Fields written back as a row parse to the same fields, unless a TSV
    // field holds what TSV cannot write (a carriage return).
    std::vector<std::string> fields;
    for (size_t k = 0; k < row.size(); ++k) fields.emplace_back(row.field(k));
    auto written = pstrain::data::FormatCsvRow(fields, dialect);
    if (!written.ok()) {
      if (dialect.quoting || text.find('\r') == std::string::npos) __builtin_trap();
    } else {
      if (!again.Parse(*written, dialect).ok() || again.size() != row.size()) __builtin_trap();
      for (size_t k = 0; k < row.size(); ++k) {
        if (again.field(k) != row.field(k)) __builtin_trap();
      }
    }
    for (size_t k = 0; k < row.size(); ++k) {
      pstrain::data::ForEachWord(row.field(k), &word, [](absl::string_view w) {
        if (w.empty()) __builtin_trap();
        for (char ch : w) {
          if ((ch >= 'A' && ch <= 'Z') || !pstrain::data::IsWordByte(static_cast<uint8_t>(ch))) {
            __builtin_trap();
          }
        }
      });
    }
    if (format->Decode(row, dense, ids, &label, 10).ok()) {
      if (label < 0 || label >= 10 || ids[4] < 0 || ids[4] >= 50) __builtin_trap();
      for (int k = 0; k < 4; ++k) {
        if (ids[k] < 0 || ids[k] > 100) __builtin_trap();
      }
    }
  }
  return 0;
}
