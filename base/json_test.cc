#include "base/json.h"

#include <cstdint>
#include <string>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(JsonTest, ParsesNestedValues) {
  ASSERT_OK_AND_ASSIGN(
      Json j, ParseJson(R"( {"a": [1, -2.5e1, true, null, "x\"\u00e9"], "b": {}} )"));
  ASSERT_TRUE(j.is_object());
  const Json* a = FindMember(j, "a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ((*a)[0].get<double>(), 1);
  EXPECT_EQ((*a)[1].get<double>(), -25);
  EXPECT_TRUE((*a)[2].get<bool>());
  EXPECT_TRUE((*a)[3].is_null());
  EXPECT_EQ((*a)[4].get<std::string>(), "x\"\xc3\xa9");
  EXPECT_TRUE(FindMember(j, "b")->is_object());
  EXPECT_EQ(FindMember(j, "c"), nullptr);
  EXPECT_EQ(FindMember(*a, "a"), nullptr);  // not an object
}

TEST(JsonTest, DumpRoundTrips) {
  Json o = Json::object();
  o["s"] = "line\nbreak \"q\"";
  o["n"] = 0.8125;
  o["i"] = 42;
  o["a"] = Json::array({false, nullptr});
  std::string text = o.dump();
  EXPECT_EQ(text, R"({"a":[false,null],"i":42,"n":0.8125,"s":"line\nbreak \"q\""})");
  ASSERT_OK_AND_ASSIGN(Json back, ParseJson(text));
  EXPECT_EQ(back.dump(), text);
}

TEST(JsonTest, IntegersAbove2To53KeepEveryDigit) {
  // 2^53 + 1 is the first integer a double cannot hold.
  const int64_t step = (int64_t{1} << 53) + 1;
  const uint64_t id = UINT64_MAX;
  Json o = Json::object();
  o["step"] = step;
  o["id"] = id;
  ASSERT_OK_AND_ASSIGN(Json back, ParseJson(o.dump()));
  EXPECT_EQ(back.at("step").get<int64_t>(), step);
  EXPECT_EQ(back.at("id").get<uint64_t>(), id);
  ASSERT_OK_AND_ASSIGN(Json read, ParseJson("[9007199254740993, -9223372036854775808]"));
  EXPECT_EQ(read[0].get<int64_t>(), 9007199254740993);
  EXPECT_EQ(read[1].get<int64_t>(), INT64_MIN);
}

TEST(JsonTest, RejectsDuplicateKeys) {
  auto j = ParseJson(R"({"a": 1, "b": {"a": 2, "a": 3}})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "duplicate key \"a\" in an object");
  // The same key in sibling objects is fine.
  EXPECT_OK(ParseJson(R"([{"a": 1}, {"a": 2}])").status());
}

TEST(JsonTest, RejectsDeepNesting) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "nesting deeper than 64 levels");
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_OK(ParseJson(ok).status());
}

TEST(JsonTest, NamesTheOffsetAndWhatWasExpected) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : {
           Case{"", "expected a value at offset 0, found end of input"},
           Case{"[1,]", "expected a value at offset 3, found ']'"},
           Case{"{\"a\" 1}", "expected ':' at offset 5, found '1'"},
           Case{"{", "expected a string at offset 1, found end of input"},
           Case{"[1, 2", "expected ']' at offset 5, found end of input"},
           Case{"-", "expected digit after '-' at offset 1, found end of input"},
           Case{"\"abc", "invalid string: missing closing quote at offset 4"},
       }) {
    auto j = ParseJson(c.text);
    ASSERT_FALSE(j.ok()) << c.text;
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(j.status().message(), c.message) << c.text;
  }
}

TEST(JsonTest, RejectsMalformedInput) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01x", "\"\\q\"", "tru",
                          "\"abc", "-", "1.", "\"\\ud800\"", "1e400", "\"a\x01\""}) {
    auto j = ParseJson(bad);
    EXPECT_FALSE(j.ok()) << bad;
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(std::string(j.status().message()).find('\n'), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace pstrain
