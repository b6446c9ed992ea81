#include "base/cli_args.h"

#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(CliArgsTest, ParsesEveryFlagForm) {
  const char* argv[] = {"prog",   "launch",      "--ps",     "2",    "--workers=3",
                        "--json", "--noverbose", "--lr=0.5", "extra"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(9, argv));
  EXPECT_EQ(*a.GetInt("ps", 0), 2);
  EXPECT_EQ(*a.GetInt("workers", 0), 3);
  EXPECT_TRUE(*a.GetBool("json", false));
  EXPECT_FALSE(*a.GetBool("verbose", true));
  EXPECT_DOUBLE_EQ(*a.GetDouble("lr", 0), 0.5);
  EXPECT_EQ(*a.GetString("absent", "dflt"), "dflt");
  ASSERT_EQ(a.positional().size(), 2u);
  EXPECT_EQ(a.positional()[0], "launch");
  EXPECT_EQ(a.positional()[1], "extra");
  EXPECT_OK(a.CheckAllUsed());
}

TEST(CliArgsTest, ADefaultFillsOnlyAFlagNotGiven) {
  const char* argv[] = {"prog", "--epochs=3"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(2, argv));
  EXPECT_FALSE(a.AddDefault("epochs", "2"));
  EXPECT_TRUE(a.AddDefault("batch_size", "64"));
  EXPECT_FALSE(a.AddDefault("batch_size", "32"));
  EXPECT_EQ(*a.GetInt("epochs", 0), 3);
  EXPECT_EQ(*a.GetInt("batch_size", 0), 64);
  EXPECT_EQ(a.raw_flags(), (std::vector<std::string>{"--epochs=3", "--batch_size=64"}));
}

TEST(CliArgsTest, BadValuesAndUnknownFlagsAreNamed) {
  const char* argv[] = {"prog", "--ps=two", "--epoch=3"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(3, argv));
  EXPECT_EQ(a.GetInt("ps", 1).status().message(), "--ps=two: expected an integer");
  EXPECT_EQ(a.CheckAllUsed().message(), "unknown flag --epoch");
}

TEST(CliArgsTest, UnknownFlagSuggestsTheNearestKnownOne) {
  const char* argv[] = {"prog", "--epoch=3"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(2, argv));
  ASSERT_OK(a.GetInt("epochs", 1).status());
  ASSERT_OK(a.GetInt("ps", 1).status());
  EXPECT_EQ(a.CheckAllUsed().message(), "unknown flag --epoch (did you mean --epochs?)");
  const char* swapped[] = {"prog", "--wokrers=2"};
  ASSERT_OK_AND_ASSIGN(CliArgs b, CliArgs::Parse(2, swapped));
  ASSERT_OK(b.GetInt("workers", 1).status());
  ASSERT_OK(b.GetInt("ps", 1).status());
  EXPECT_EQ(b.CheckAllUsed().message(), "unknown flag --wokrers (did you mean --workers?)");
  // Nothing near: no guess.
  const char* far[] = {"prog", "--learning=0.1"};
  ASSERT_OK_AND_ASSIGN(CliArgs c, CliArgs::Parse(2, far));
  ASSERT_OK(c.GetInt("ps", 1).status());
  EXPECT_EQ(c.CheckAllUsed().message(), "unknown flag --learning");
}

TEST(CliArgsTest, FlagsKnownElsewhereAreSetApartAndSuggested) {
  const char* argv[] = {"prog", "--epochs=3", "--bind=x", "--max_calls=4"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(4, argv));
  ASSERT_OK(a.GetString("bind", "").status());
  std::vector<std::string> ignored;
  EXPECT_OK(a.CheckAllUsed({"epochs", "max_calls", "seed"}, &ignored));
  EXPECT_EQ(ignored, (std::vector<std::string>{"epochs", "max_calls"}));
  // A typo is still refused, with the nearest name from either set.
  const char* typo[] = {"prog", "--epoch=3"};
  ASSERT_OK_AND_ASSIGN(CliArgs b, CliArgs::Parse(2, typo));
  ASSERT_OK(b.GetString("bind", "").status());
  ignored.clear();
  EXPECT_EQ(b.CheckAllUsed({"epochs"}, &ignored).message(),
            "unknown flag --epoch (did you mean --epochs?)");
  EXPECT_TRUE(ignored.empty());
}

TEST(CliArgsTest, IntInRangeNamesTheFlagAndTheRange) {
  const char* argv[] = {"prog", "--ps=0", "--workers=64", "--epochs=x"};
  ASSERT_OK_AND_ASSIGN(CliArgs a, CliArgs::Parse(4, argv));
  EXPECT_EQ(a.GetIntInRange("ps", 1, 1, 64).status().message(), "--ps=0: must be in 1..64");
  EXPECT_EQ(*a.GetIntInRange("workers", 1, 1, 64), 64);
  EXPECT_EQ(*a.GetIntInRange("absent", 5, 1, 64), 5);
  EXPECT_EQ(a.GetIntInRange("epochs", 1, 1, 9).status().message(),
            "--epochs=x: expected an integer");
  EXPECT_OK(a.CheckAllUsed());
}

}  // namespace
}  // namespace pstrain
