#include "exporter/npz_writer.h"

#include <cstring>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(NpzWriterTest, NpyHeaderIsAlignedAndDescribesTheArray) {
  const std::string npy = NpyBytes({"w", {2, 3}, {1, 2, 3, 4, 5, 6}});
  ASSERT_GE(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header = static_cast<unsigned char>(npy[8]) | static_cast<unsigned char>(npy[9])
                                                                 << 8;
  EXPECT_EQ((10 + header) % 64, 0u);
  EXPECT_EQ(npy.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(npy[10 + header - 1], '\n');
  ASSERT_EQ(npy.size(), 10 + header + 6 * 4);
  float last = 0;
  std::memcpy(&last, npy.data() + npy.size() - 4, 4);
  EXPECT_EQ(last, 6.0f);
  EXPECT_NE(NpyBytes({"b", {3}, {1, 2, 3}}).find("'shape': (3,), }"), std::string::npos);
}

TEST(NpzWriterTest, TheArchiveEndsWithItsDirectoryAndRefusesAWrongShape) {
  ASSERT_OK_AND_ASSIGN(std::string zip,
                       NpzBytes({{"a/kernel", {1, 2}, {1, 2}}, {"a/bias", {2}, {3, 4}}}));
  // Local header first, end of central directory last, naming 2 entries.
  EXPECT_EQ(zip.substr(0, 4), std::string("PK\x03\x04", 4));
  ASSERT_GE(zip.size(), 22u);
  const std::string end = zip.substr(zip.size() - 22);
  EXPECT_EQ(end.substr(0, 4), std::string("PK\x05\x06", 4));
  EXPECT_EQ(end[10], 2);
  EXPECT_NE(zip.find("a/kernel.npy"), std::string::npos);
  EXPECT_EQ(NpzBytes({{"w", {2, 2}, {1, 2, 3}}}).status().message(),
            "w: 3 values for a shape of 4");
}

}  // namespace
}  // namespace pstrain
