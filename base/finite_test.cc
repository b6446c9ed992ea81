#include "base/finite.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// NaN and both infinities at every position of arrays around the vector
// widths, read at odd addresses: the first one is found, and extreme finite
// values (the largest float, denormals, -0) are not taken for one.
TEST(FiniteTest, FindsTheFirstNanOrInfAtAnyPositionAndAlignment) {
  const float specials[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      const float finite[] = {std::numeric_limits<float>::max(), -0.0f,
                              std::numeric_limits<float>::denorm_min(), 1.5f};
      values[i] = finite[i % 4];
    }
    std::vector<char> bytes(4 * n + 1);
    if (n > 0) std::memcpy(bytes.data() + 1, values.data(), 4 * n);
    EXPECT_EQ(FindNonFinite(bytes.data() + 1, n), -1) << n;
    EXPECT_EQ(FirstNonFinite(bytes.data() + 1, n), -1) << n;
    for (int64_t at = 0; at < n; at += 7) {
      for (float special : specials) {
        std::vector<char> bad = bytes;
        std::memcpy(bad.data() + 1 + 4 * at, &special, 4);
        if (at + 3 < n) std::memcpy(bad.data() + 1 + 4 * (at + 3), &special, 4);
        EXPECT_EQ(FindNonFinite(bad.data() + 1, n), at) << n << " " << special;
        EXPECT_TRUE(AnyNonFinite(bad.data() + 1, n));
      }
    }
  }
}

}  // namespace
}  // namespace pstrain
