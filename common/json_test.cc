#include "common/json.h"

#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(JsonTest, ParsesNestedValues) {
  ASSERT_OK_AND_ASSIGN(
      Json j, ParseJson(R"( {"a": [1, -2.5e1, true, null, "x\"\u00e9"], "b": {}} )"));
  ASSERT_TRUE(j.is_object());
  const Json* a = j.Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array_items().size(), 5u);
  EXPECT_EQ(a->array_items()[0].number_value(), 1);
  EXPECT_EQ(a->array_items()[1].number_value(), -25);
  EXPECT_TRUE(a->array_items()[2].bool_value());
  EXPECT_TRUE(a->array_items()[3].is_null());
  EXPECT_EQ(a->array_items()[4].string_value(), "x\"\xc3\xa9");
  EXPECT_TRUE(j.Find("b")->is_object());
  EXPECT_EQ(j.Find("c"), nullptr);
}

TEST(JsonTest, DumpRoundTrips) {
  Json o = Json::Object();
  o.Set("s", Json::String("line\nbreak \"q\""));
  o.Set("n", Json::Number(0.8125));
  o.Set("i", Json::Number(42));
  o.Set("a", Json::Array().Append(Json::Bool(false)).Append(Json()));
  std::string text = o.Dump();
  EXPECT_EQ(text, R"({"a":[false,null],"i":42,"n":0.8125,"s":"line\nbreak \"q\""})");
  ASSERT_OK_AND_ASSIGN(Json back, ParseJson(text));
  EXPECT_EQ(back.Dump(), text);
}

TEST(JsonTest, RejectsDuplicateKeys) {
  auto j = ParseJson(R"({"a": 1, "a": 2})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "duplicate key \"a\" at offset 9");
}

TEST(JsonTest, RejectsDeepNesting) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nesting of at most 64 levels"),
            absl::string_view::npos);
}

TEST(JsonTest, RejectsMalformedInput) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01x", "\"\\q\"", "tru",
                          "\"abc", "-", "1.", "\"\\ud800\""}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace pstrain
