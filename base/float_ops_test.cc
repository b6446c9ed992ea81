#include "base/float_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/bfloat16.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Random floats over many magnitudes, with both zeros, denormals,
// infinities and NaN among them.
std::vector<float> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-140, 120);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::min() / 4,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max()};
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = (rng() % 16 == 0) ? specials[rng() % 8] : std::ldexp(mantissa(rng), exponent(rng));
  }
  return v;
}

// Same bits as the plain loop (a NaN only needs to stay a NaN).
void ExpectSame(float got, float want, int64_t i) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "element " << i;
  } else {
    EXPECT_EQ(BitsOf(got), BitsOf(want)) << "element " << i << ": " << got << " vs " << want;
  }
}

// Lengths around every vector width, at offsets that leave the arrays
// unaligned, and one large array.
const int64_t kLengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, (1 << 20) + 5};

TEST(FloatOpsTest, AddFloatsMatchesThePlainLoopBitForBit) {
  for (int64_t n : kLengths) {
    for (int64_t offset : {0, 1, 3}) {
      std::vector<float> dst = Values(n + offset, static_cast<uint32_t>(n + 1));
      const std::vector<float> src = Values(n + offset, static_cast<uint32_t>(n + 1000));
      std::vector<float> want = dst;
      for (int64_t i = offset; i < n + offset; ++i) want[i] = want[i] + src[i];
      AddFloats(dst.data() + offset, src.data() + offset, n);
      for (int64_t i = 0; i < n + offset; ++i) ExpectSame(dst[i], want[i], i);
      if (HasFailure()) return;
    }
  }
}

TEST(FloatOpsTest, AddBfloat16sWidensThenAdds) {
  for (int64_t n : kLengths) {
    for (int64_t offset : {0, 1}) {
      std::vector<float> dst = Values(n + offset, static_cast<uint32_t>(n + 7));
      const std::vector<float> wide = Values(n + offset, static_cast<uint32_t>(n + 77));
      std::vector<uint16_t> src(n + offset);
      for (int64_t i = 0; i < n + offset; ++i) src[i] = ToBfloat16(wide[i]);
      std::vector<float> want = dst;
      for (int64_t i = offset; i < n + offset; ++i) want[i] = want[i] + FromBfloat16(src[i]);
      AddBfloat16s(dst.data() + offset, src.data() + offset, n);
      for (int64_t i = 0; i < n + offset; ++i) ExpectSame(dst[i], want[i], i);
      if (HasFailure()) return;
    }
  }
  std::vector<float> one = {1.5f};
  const uint16_t two = 0x4000;  // 2.0
  AddBfloat16s(one.data(), &two, 1);
  EXPECT_EQ(one[0], 3.5f);
}

TEST(FloatOpsTest, BytesToFloatsWidensThenScales) {
  for (int64_t n : kLengths) {
    std::vector<uint8_t> in(n + 1);
    for (int64_t i = 0; i < n + 1; ++i) in[i] = static_cast<uint8_t>((i * 37 + n) % 256);
    std::vector<float> out(n + 2, 42.0f);
    BytesToFloats(in.data() + 1, n, 1.0f / 255.0f, out.data() + 1);
    EXPECT_EQ(out[0], 42.0f);
    EXPECT_EQ(out[n + 1], 42.0f);
    for (int64_t i = 1; i <= n; ++i) ExpectSame(out[i], in[i] * (1.0f / 255.0f), i);
    if (HasFailure()) return;
  }
  const uint8_t ends[] = {0, 255};
  float widened[2];
  BytesToFloats(ends, 2, 1.0f / 255.0f, widened);
  EXPECT_EQ(widened[0], 0.0f);
  EXPECT_EQ(widened[1], 1.0f);
}

TEST(FloatOpsTest, ScaleFloatsOutOfPlaceAndInPlace) {
  for (int64_t n : kLengths) {
    for (float scale : {0.5f, 1.0f / 3.0f, -0.0f}) {
      const std::vector<float> in = Values(n + 1, static_cast<uint32_t>(n + 9));
      std::vector<float> want(n + 1);
      for (int64_t i = 0; i < n + 1; ++i) want[i] = in[i] * scale;
      // Into another array, from an unaligned start; the element past the
      // end is not written.
      std::vector<float> out(n + 2, 42.0f);
      ScaleFloats(in.data() + 1, n, scale, out.data() + 1);
      EXPECT_EQ(out[0], 42.0f);
      EXPECT_EQ(out[n + 1], 42.0f);
      for (int64_t i = 1; i <= n; ++i) ExpectSame(out[i], want[i], i);
      // In place.
      std::vector<float> same = in;
      ScaleFloats(same.data() + 1, n, scale, same.data() + 1);
      ExpectSame(same[0], in[0], 0);
      for (int64_t i = 1; i <= n; ++i) ExpectSame(same[i], want[i], i);
      if (HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace pstrain
