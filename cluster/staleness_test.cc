#include "cluster/staleness.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(StalenessTest, BucketsDoubleInWidthAndNamesSayTheirBounds) {
  const int64_t cases[][2] = {{-3, 0}, {0, 0}, {1, 1}, {2, 2},  {3, 3},  {4, 3},
                              {5, 4},  {8, 4}, {9, 5}, {64, 7}, {65, 8}, {1 << 30, 8}};
  for (const auto& [staleness, bucket] : cases) {
    EXPECT_EQ(StalenessBucket(staleness), bucket) << staleness;
  }
  // Each bucket's upper bound falls in it, and the next value in the next.
  for (int b = 0; b + 1 < kStalenessBuckets; ++b) {
    const auto upper = static_cast<int64_t>(StalenessBucketUpper(b));
    EXPECT_EQ(StalenessBucket(upper), b);
    EXPECT_EQ(StalenessBucket(upper + 1), b + 1);
    EXPECT_LE(StalenessBucketMid(b), StalenessBucketUpper(b));
  }
  EXPECT_STREQ(StalenessBucketName(3), "3-4");
  EXPECT_STREQ(StalenessBucketName(7), "33-64");
  EXPECT_STREQ(StalenessBucketName(8), "65+");
}

}  // namespace
}  // namespace pstrain
