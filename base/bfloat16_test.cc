#include "base/bfloat16.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bfloat16Test, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(ToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(ToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(FromBfloat16(0x3f80), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to even, down to 1.
  EXPECT_EQ(ToBfloat16(Bits(0x3f808000)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to even, up.
  EXPECT_EQ(ToBfloat16(Bits(0x3f818000)), 0x3f82);
  // Just above halfway rounds up, just below rounds down.
  EXPECT_EQ(ToBfloat16(Bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(ToBfloat16(Bits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(ToBfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(ToBfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(std::nanf("")))));
  // A NaN whose payload sits only in the low half stays a NaN.
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(Bits(0x7f800001)))));
  // The largest floats round up to infinity, as in every bfloat16 library.
  EXPECT_TRUE(std::isinf(FromBfloat16(ToBfloat16(std::numeric_limits<float>::max()))));
  EXPECT_EQ(FromBfloat16(ToBfloat16(-0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(FromBfloat16(ToBfloat16(-0.0f))));
}

TEST(Bfloat16Test, RelativeErrorIsAtMostHalfAUnitInTheLastPlace) {
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    for (float v : {x, -x}) {
      const float back = FromBfloat16(ToBfloat16(v));
      EXPECT_LE(std::fabs(back - v), std::fabs(v) * (1.0f / 256)) << v;
    }
  }
}

// Arrays of every length around the block size, converted into other
// memory and in place, at odd addresses: the same as element by element.
TEST(Bfloat16Test, ArraysConvertLikeElementsInPlaceOrNotAtAnyAlignment) {
  // Special values among them: the vector loops (16 at a time) and the
  // scalar ones must agree on NaNs, infinities, ties, denormals and zeros.
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            1.00390625f,  // 1 + 2^-8: a tie, to even (down)
                            1.01171875f,  // 1 + 3 * 2^-8: a tie, to even (up)
                            std::numeric_limits<float>::denorm_min(),
                            -0.0f,
                            std::numeric_limits<float>::max()};
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 1023, 1024, 1025, 3000}) {
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      values[i] = i % 5 == 3 ? specials[(i / 5) % 8] : std::sin(0.37f * i) * (1 + i);
    }
    std::vector<uint16_t> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = ToBfloat16(values[i]);

    std::vector<char> out(2 * n + 1);
    FloatsToBfloat16(values.data(), n, out.data() + 1);
    std::vector<float> back(n + 1);
    Bfloat16ToFloats(out.data() + 1, n, reinterpret_cast<char*>(back.data()) + 0);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t got;
      std::memcpy(&got, out.data() + 1 + 2 * i, 2);
      ASSERT_EQ(got, want[i]) << n << " " << i;
      uint32_t back_bits, want_bits;
      const float want_back = FromBfloat16(want[i]);
      std::memcpy(&back_bits, &back[i], 4);
      std::memcpy(&want_bits, &want_back, 4);
      ASSERT_EQ(back_bits, want_bits) << n << " " << i;
    }

    std::vector<char> place(4 * n + 3);
    if (n > 0) std::memcpy(place.data() + 3, values.data(), 4 * n);
    FloatsToBfloat16(place.data() + 3, n, place.data() + 3);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t got;
      std::memcpy(&got, place.data() + 3 + 2 * i, 2);
      ASSERT_EQ(got, want[i]) << n << " " << i;
    }
    Bfloat16ToFloats(place.data() + 3, n, place.data() + 3);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t got, want_bits;
      const float want_back = FromBfloat16(want[i]);
      std::memcpy(&got, place.data() + 3 + 4 * i, 4);
      std::memcpy(&want_bits, &want_back, 4);
      ASSERT_EQ(got, want_bits) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace pstrain
