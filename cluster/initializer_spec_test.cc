#include "cluster/initializer_spec.h"

#include "absl/strings/str_cat.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(InitializerSpecTest, ReadsEachKind) {
  auto zeros = ParseInitializerSpec("zeros");
  ASSERT_OK(zeros);
  EXPECT_EQ(zeros->kind, InitializerSpec::Kind::kZeros);
  auto ones = ParseInitializerSpec("ones");
  ASSERT_OK(ones);
  EXPECT_EQ(ones->kind, InitializerSpec::Kind::kOnes);
  auto uniform = ParseInitializerSpec("uniform:0.05");
  ASSERT_OK(uniform);
  EXPECT_EQ(uniform->kind, InitializerSpec::Kind::kUniform);
  EXPECT_FLOAT_EQ(uniform->limit, 0.05f);
  auto none = ParseInitializerSpec("uniform:0");
  ASSERT_OK(none);
  EXPECT_EQ(none->limit, 0.0f);
  auto glorot = ParseInitializerSpec("glorot_uniform", /*allow_glorot=*/true);
  ASSERT_OK(glorot);
  EXPECT_EQ(glorot->kind, InitializerSpec::Kind::kGlorotUniform);
}

TEST(InitializerSpecTest, RefusesOthersQuotingThem) {
  for (const char* bad : {"", "twos", "uniform:", "uniform:-1", "uniform:inf", "uniform:nan",
                          "uniform:1x", "Zeros"}) {
    SCOPED_TRACE(bad);
    auto s = ParseInitializerSpec(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(),
              absl::StrCat("\"", bad, "\" is not zeros, ones or uniform:A (A >= 0)"));
  }
  // glorot_uniform only where the caller allows it (dense kernels).
  EXPECT_EQ(ParseInitializerSpec("glorot_uniform").status().message(),
            "\"glorot_uniform\" is not zeros, ones or uniform:A (A >= 0)");
  EXPECT_EQ(ParseInitializerSpec("he_normal", true).status().message(),
            "\"he_normal\" is not glorot_uniform, zeros, ones or uniform:A (A >= 0)");
}

}  // namespace
}  // namespace pstrain
