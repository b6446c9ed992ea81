#include "base/stream_copy.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Every alignment of source and destination, lengths around the 16-byte
// head and the 64-byte body: the copy equals the source and no byte outside
// the destination range changes.
TEST(StreamCopyTest, CopiesEveryAlignmentAndLengthExactly) {
  std::vector<char> src(4096 + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 131 + 7);
  const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096};
  for (size_t src_off = 0; src_off < 16; src_off += 3) {
    for (size_t dst_off = 0; dst_off < 16; ++dst_off) {
      for (size_t n : lengths) {
        std::vector<char> dst(4096 + 160, '\x5a');
        StreamCopy(dst.data() + 16 + dst_off, src.data() + src_off, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 16 + dst_off && i < 16 + dst_off + n;
          const char want = inside ? src[src_off + i - 16 - dst_off] : '\x5a';
          ASSERT_EQ(dst[i], want) << "src_off " << src_off << " dst_off " << dst_off
                                  << " n " << n << " byte " << i;
        }
      }
    }
  }
}

TEST(StreamCopyTest, CopiesMebibytesOfFloats) {
  std::vector<float> src(1 << 20), dst(1 << 20, -1.0f);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f;
  StreamCopy(dst.data(), src.data(), src.size() * sizeof(float));
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace pstrain
