#include "data/tfrecord.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "data/testing/tfrecord_files.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

std::string Path(const std::string& name) { return testing::TempDir() + "/" + name; }

std::vector<std::string> SomeRecords() {
  std::vector<std::string> records = {"abc", "", std::string(1, '\0'), "hello, records"};
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  records.push_back(big);
  return records;
}

using testing::WriteRecords;

// The format's bytes, with masked CRC-32Cs worked out by hand (a bitwise
// CRC-32C outside this code base): "abc" and the empty record.
TEST(TfRecordTest, FramesRecordsWithTheFormatsExactBytes) {
  const std::string abc = FrameRecord("abc");
  const std::string want_abc =
      std::string("\x03\0\0\0\0\0\0\0", 8) + "\xb0\x99\x49\x0e" + "abc" + "\x6e\x57\xf1\x21";
  EXPECT_EQ(abc, want_abc);
  const std::string empty = FrameRecord("");
  EXPECT_EQ(empty, std::string(8, '\0') + "\x29\x03\x98\x07" + "\xd8\xea\x82\xa2");
  // What the writer puts in a plain file is exactly the frames.
  const std::string path = Path("exact.tfrecord");
  ASSERT_OK(WriteRecords(path, Compression::kNone, {"abc", ""}));
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFile(path));
  EXPECT_EQ(bytes, want_abc + empty);
}

TEST(TfRecordTest, RecordsReadBackEqualPlainAndGzip) {
  const std::vector<std::string> records = SomeRecords();
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string path = Path(c == Compression::kGzip ? "round.tfrecord.gz" : "round.tfrecord");
    ASSERT_OK(WriteRecords(path, c, records));
    ASSERT_OK_AND_ASSIGN(auto back, ReadAllRecords(path, CompressionForPath(path)));
    EXPECT_TRUE(back == records);
  }
  // A GZIP file really is compressed: its first bytes are gzip's magic.
  ASSERT_OK_AND_ASSIGN(std::string gz, ReadFile(Path("round.tfrecord.gz")));
  EXPECT_EQ(gz.substr(0, 2), "\x1f\x8b");
  EXPECT_LT(gz.size(), size_t{1} << 20);
}

TEST(TfRecordTest, CompressionNamesAsTfData) {
  ASSERT_OK_AND_ASSIGN(Compression c, ParseCompression("GZIP"));
  EXPECT_EQ(c, Compression::kGzip);
  ASSERT_OK_AND_ASSIGN(c, ParseCompression(""));
  EXPECT_EQ(c, Compression::kNone);
  EXPECT_EQ(ParseCompression("ZLIB").status().message(),
            "compression \"ZLIB\" is not one of \"\", \"NONE\", \"GZIP\"");
  EXPECT_EQ(CompressionForPath("/data/data/train-0.tfrecord.gz"), Compression::kGzip);
  EXPECT_EQ(CompressionForPath("train.tfrecord"), Compression::kNone);
}

// Writes `bytes` as a file and reads it, returning the first error.
absl::Status FirstError(const std::string& name, const std::string& bytes, Compression c,
                        int* good = nullptr, bool* continues = nullptr) {
  const std::string path = Path(name);
  EXPECT_OK(WriteFileAtomically(path, bytes));
  auto reader = TfRecordReader::Open(path, c);
  if (!reader.ok()) return reader.status();
  std::string record;
  int n = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) {
      if (good != nullptr) *good = n;
      if (continues != nullptr) *continues = (*reader)->can_continue();
      return more.status();
    }
    if (!*more) break;
    ++n;
  }
  if (good != nullptr) *good = n;
  return absl::OkStatus();
}

TEST(TfRecordTest, CorruptionIsNamedWithFileAndOffset) {
  const std::string first = FrameRecord("first record"), second = FrameRecord("second");
  const std::string file = first + second;
  const int64_t at = static_cast<int64_t>(first.size());  // the second record's offset
  int good = 0;
  bool continues = true;

  std::string bytes = file;
  bytes[at + 2] ^= 0x40;  // its length
  absl::Status s = FirstError("len.tfrecord", bytes, Compression::kNone, &good, &continues);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), Path("len.tfrecord") + " at byte " + std::to_string(at) +
                             ": the record length's checksum does not match (corrupt length "
                             "or checksum)");
  EXPECT_EQ(good, 1);
  EXPECT_FALSE(continues);

  bytes = file;
  bytes[at + 9] ^= 0x01;  // the length's CRC
  s = FirstError("lencrc.tfrecord", bytes, Compression::kNone);
  EXPECT_NE(s.message().find(" at byte " + std::to_string(at) +
                             ": the record length's checksum does not match"),
            std::string::npos)
      << s;

  bytes = file;
  bytes[at + 12 + 3] ^= 0x01;  // its data
  s = FirstError("data.tfrecord", bytes + FrameRecord("third"), Compression::kNone, &good,
                 &continues);
  EXPECT_EQ(s.message(), Path("data.tfrecord") + " at byte " + std::to_string(at) +
                             ": the checksum of the record's 6 bytes of data does not match "
                             "(corrupt data or checksum)");
  EXPECT_TRUE(continues);  // the third record can still be read

  s = FirstError("short.tfrecord", file.substr(0, file.size() - 3), Compression::kNone, &good);
  EXPECT_EQ(s.message(), Path("short.tfrecord") + " at byte " + std::to_string(at) +
                             ": record of 6 bytes cut short (the file ends 7 bytes into its 10)");
  EXPECT_EQ(good, 1);

  s = FirstError("header.tfrecord", file.substr(0, at + 5), Compression::kNone);
  EXPECT_EQ(s.message(), Path("header.tfrecord") + " at byte " + std::to_string(at) +
                             ": record header cut short (5 of 12 bytes)");
}

// Skip frames what Next reads, without the data: the same count, the same
// offsets and errors for a file that ends inside a record; a bad data
// checksum goes unseen.
TEST(TfRecordTest, SkipFramesAsNextReads) {
  const std::vector<std::string> records = SomeRecords();
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string path = Path(c == Compression::kGzip ? "skip.tfrecord.gz" : "skip.tfrecord");
    ASSERT_OK(WriteRecords(path, c, records));
    ASSERT_OK_AND_ASSIGN(auto reader, TfRecordReader::Open(path, c));
    int n = 0;
    while (true) {
      ASSERT_OK_AND_ASSIGN(bool more, reader->Skip());
      if (!more) break;
      ++n;
    }
    EXPECT_EQ(n, static_cast<int>(records.size()));
    int64_t bytes = 0;
    for (const std::string& r : records) bytes += 16 + static_cast<int64_t>(r.size());
    EXPECT_EQ(reader->offset(), bytes);
  }
  const std::string first = FrameRecord("first record"), second = FrameRecord("second");
  std::string bad = first + second;
  bad[first.size() + 12 + 3] ^= 0x01;  // the second record's data
  const std::string cut = (first + second).substr(0, first.size() + second.size() - 3);
  for (Compression c : {Compression::kNone, Compression::kGzip}) {
    const std::string ext = c == Compression::kGzip ? ".tfrecord.gz" : ".tfrecord";
    // The files' bytes, compressed as their names say.
    auto write = [&](const std::string& name, const std::string& bytes) {
      if (c == Compression::kNone) return WriteFileAtomically(Path(name), bytes);
      gzFile gz = gzopen(Path(name).c_str(), "wb");
      gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(gz);
      return absl::OkStatus();
    };
    ASSERT_OK(write("skipbad" + ext, bad));
    ASSERT_OK_AND_ASSIGN(auto reader, TfRecordReader::Open(Path("skipbad" + ext), c));
    EXPECT_TRUE(*reader->Skip());
    EXPECT_TRUE(*reader->Skip());
    EXPECT_FALSE(*reader->Skip());
    ASSERT_OK(write("skipcut" + ext, cut));
    ASSERT_OK_AND_ASSIGN(reader, TfRecordReader::Open(Path("skipcut" + ext), c));
    EXPECT_TRUE(*reader->Skip());
    absl::StatusOr<bool> more = reader->Skip();
    EXPECT_EQ(more.status().message(),
              Path("skipcut" + ext) + " at byte " + std::to_string(first.size()) +
                  ": record of 6 bytes cut short (the file ends 7 bytes into its 10)");
    EXPECT_FALSE(reader->can_continue());
  }
  // A record longer than ByteSource::kSeekBytes is seeked over in a plain
  // file: one cut short is named as a short one is.
  const std::string big = FrameRecord(std::string(ByteSource::kSeekBytes + 100, 'x'));
  ASSERT_OK(WriteFileAtomically(Path("skipbig.tfrecord"), first + big.substr(0, big.size() - 50)));
  ASSERT_OK_AND_ASSIGN(auto reader,
                       TfRecordReader::Open(Path("skipbig.tfrecord"), Compression::kNone));
  EXPECT_TRUE(*reader->Skip());
  absl::StatusOr<bool> more = reader->Skip();
  EXPECT_EQ(more.status().message(),
            absl::StrCat(Path("skipbig.tfrecord"), " at byte ", first.size(), ": record of ",
                         ByteSource::kSeekBytes + 100, " bytes cut short (the file ends ",
                         ByteSource::kSeekBytes + 100 + 4 - 50, " bytes into its ",
                         ByteSource::kSeekBytes + 104, ")"));
}

TEST(TfRecordTest, AGzipFileCutShortIsNamed) {
  const std::vector<std::string> records = SomeRecords();
  const std::string whole = Path("whole.tfrecord.gz");
  ASSERT_OK(WriteRecords(whole, Compression::kGzip, records));
  ASSERT_OK_AND_ASSIGN(std::string gz, ReadFile(whole));
  const absl::Status s =
      FirstError("cut.tfrecord.gz", gz.substr(0, gz.size() / 2), Compression::kGzip);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), Path("cut.tfrecord.gz") + " at byte ")) << s;
  EXPECT_NE(s.message().find(": the GZIP stream is corrupt or cut short ("), std::string::npos)
      << s;
}

TEST(TfRecordTest, AMissingFileIsNamed) {
  auto reader = TfRecordReader::Open(Path("nope.tfrecord"), Compression::kNone);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find("nope.tfrecord"), std::string::npos);
}

// Every Feature kind survives a round trip, and FloatList / Int64List parse
// from the unpacked encoding (one tag per value) as well as the packed one.
TEST(ExampleTest, EveryFeatureKindRoundTripsPackedOrNot) {
  v1::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["image"].mutable_float_list()->add_value(0.5f);
  f["image"].mutable_float_list()->add_value(-2.0f);
  f["label"].mutable_int64_list()->add_value(int64_t{1} << 40);
  f["label"].mutable_int64_list()->add_value(-3);
  f["text"].mutable_bytes_list()->add_value(std::string("a\0b", 3));
  f["text"].mutable_bytes_list()->add_value("");
  v1::Example back;
  ASSERT_TRUE(back.ParseFromString(ex.SerializeAsString()));
  EXPECT_EQ(back.features().feature().at("image").float_list().value(1), -2.0f);
  EXPECT_EQ(back.features().feature().at("label").int64_list().value(0), int64_t{1} << 40);
  EXPECT_EQ(back.features().feature().at("text").bytes_list().value(0), std::string("a\0b", 3));

  // FloatList{value: [1.5, 2]} unpacked: tag (1 << 3 | 5) and 4 bytes each.
  const std::string unpacked_floats =
      std::string("\x0d\x00\x00\xc0\x3f", 5) + std::string("\x0d\x00\x00\x00\x40", 5);
  v1::FloatList floats;
  ASSERT_TRUE(floats.ParseFromString(unpacked_floats));
  ASSERT_EQ(floats.value_size(), 2);
  EXPECT_EQ(floats.value(0), 1.5f);
  EXPECT_EQ(floats.value(1), 2.0f);
  // Int64List{value: [7, 300]} unpacked: tag (1 << 3 | 0) and a varint each.
  v1::Int64List ints;
  ASSERT_TRUE(ints.ParseFromString(std::string("\x08\x07\x08\xac\x02", 5)));
  ASSERT_EQ(ints.value_size(), 2);
  EXPECT_EQ(ints.value(1), 300);
  // And packed, as ours writes it: tag (1 << 3 | 2), length, varints.
  EXPECT_EQ(ints.SerializeAsString(), std::string("\x0a\x03\x07\xac\x02", 5));
}

}  // namespace
}  // namespace pstrain::data
