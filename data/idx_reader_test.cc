#include "data/idx_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>

#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace pstrain::data {
namespace {

std::string TempPath(const std::string& name) { return pstrain::testing::TempDir() + "/" + name; }

std::string WritePlain(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string WriteGz(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), bytes.size());
  gzclose(f);
  return path;
}

// A 2x3 unsigned-byte matrix.
std::string Matrix2x3() {
  return std::string("\x00\x00\x08\x02\x00\x00\x00\x02\x00\x00\x00\x03", 12) +
         std::string("\x01\x02\x03\x04\x05\x06", 6);
}

TEST(IdxReaderTest, ReadsPlainAndGzipFiles) {
  for (const std::string& path :
       {WritePlain("m.idx", Matrix2x3()), WriteGz("m.idx.gz", Matrix2x3())}) {
    ASSERT_OK_AND_ASSIGN(IdxArray a, ReadIdxFile(path));
    EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.values, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(IdxReaderTest, TruncatedFileIsDataLossNamingTheFileAndTheByte) {
  std::string path = WriteGz("short.idx.gz", Matrix2x3().substr(0, 15));
  auto a = ReadIdxFile(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(a.status().message(),
            path + " at byte 15: truncated: header promises 6 data bytes, file has 3");
}

TEST(IdxReaderTest, RejectsBadHeadersAndTrailingBytes) {
  std::string bad_magic = Matrix2x3();
  bad_magic[0] = 0x1f;
  std::string p = WritePlain("magic.idx", bad_magic);
  EXPECT_EQ(ReadIdxFile(p).status().message(),
            p + " at byte 0: bad magic number 0x1f000802 (expected 0x0000TTRR)");
  std::string bad_type = Matrix2x3();
  bad_type[2] = 0x0d;
  p = WritePlain("type.idx", bad_type);
  EXPECT_EQ(ReadIdxFile(p).status().message(),
            p + " at byte 2: data type 0x0d is not unsigned byte (0x08)");
  p = WritePlain("trail.idx", Matrix2x3() + "x");
  EXPECT_EQ(ReadIdxFile(p).status().message(),
            p + " at byte 18: has bytes after the data its header describes");
  p = WritePlain("hdr.idx", Matrix2x3().substr(0, 6));
  EXPECT_EQ(ReadIdxFile(p).status().message(),
            p + " at byte 4: truncated in dimension 0 of the header");
  EXPECT_EQ(ReadIdxFile(TempPath("absent.idx")).status().code(), absl::StatusCode::kNotFound);
}

// Headers that promise more than the file holds: the size is checked
// without overflowing, and a short file is refused without first allocating
// what its header promises.
TEST(IdxReaderTest, HugeOrOverflowingHeadersAreRefused) {
  const std::string four_max = std::string("\x00\x00\x08\x04", 4) + std::string(16, '\xff');
  std::string p = WritePlain("overflow.idx", four_max);
  EXPECT_EQ(ReadIdxFile(p).status().message(), p + " at byte 8: larger than 16 GiB");
  // 8 GiB promised, 3 bytes given.
  const std::string eight_gib =
      std::string("\x00\x00\x08\x02\x00\x02\x00\x00\x00\x01\x00\x00", 12) + std::string("abc");
  p = WritePlain("short.idx", eight_gib);
  EXPECT_EQ(ReadIdxFile(p).status().message(),
            p + " at byte 15: truncated: header promises 8589934592 data bytes, file has 3");
}

}  // namespace
}  // namespace pstrain::data
