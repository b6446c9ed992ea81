#include "optim/initializer.h"

#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

TEST(InitializerTest, ZerosAndUniformInRange) {
  ASSERT_OK_AND_ASSIGN(Initializer z, Initializer::Parse("zeros"));
  std::vector<float> v(100, 7.0f);
  z.Fill(1, "w", 0, 100, v.data());
  for (float x : v) EXPECT_EQ(x, 0.0f);
  ASSERT_OK_AND_ASSIGN(Initializer ones, Initializer::Parse("ones"));
  ones.Fill(1, "w", 3, 100, v.data());
  for (float x : v) EXPECT_EQ(x, 1.0f);
  ASSERT_OK_AND_ASSIGN(Initializer u, Initializer::Parse("uniform:0.5"));
  u.Fill(1, "w", 0, 100, v.data());
  double sum = 0;
  for (float x : v) {
    EXPECT_LE(x, 0.5f);
    EXPECT_GE(x, -0.5f);
    sum += x;
  }
  EXPECT_LT(std::abs(sum / 100), 0.15);
  EXPECT_NE(v[0], v[1]);
}

TEST(InitializerTest, ValueDependsOnlyOnSeedVariableAndIndex) {
  ASSERT_OK_AND_ASSIGN(Initializer u, Initializer::Parse("uniform:1"));
  std::vector<float> whole(10), tail(4), other(10), reseeded(10);
  u.Fill(3, "emb", 0, 10, whole.data());
  u.Fill(3, "emb", 6, 4, tail.data());  // a shard holding elements 6..9
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tail[i], whole[6 + i]);
  u.Fill(3, "emb2", 0, 10, other.data());
  u.Fill(4, "emb", 0, 10, reseeded.data());
  EXPECT_NE(other, whole);
  EXPECT_NE(reseeded, whole);
}

TEST(InitializerTest, RejectsUnknownSpecs) {
  for (const char* bad : {"", "twos", "uniform:", "uniform:-1", "uniform:inf"}) {
    auto i = Initializer::Parse(bad);
    ASSERT_FALSE(i.ok()) << bad;
    EXPECT_EQ(i.status().message(),
              std::string("initializer \"") + bad + "\" is not zeros, ones or uniform:A (A >= 0)");
  }
}

}  // namespace
}  // namespace pstrain::optim
