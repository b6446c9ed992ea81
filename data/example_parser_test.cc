#include "data/example_parser.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"

namespace pstrain::data {
namespace {

// Protobuf wire pieces, written by hand for what the generated serializer
// never writes (unpacked lists, pieces, kinds switched).
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Bytes(int field, const std::string& body) {
  return Varint(field << 3 | 2) + Varint(body.size()) + body;
}
std::string Fixed32(int field, float v) {
  std::string out = Varint(field << 3 | 5);
  out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}
std::string Entry(const std::string& name, const std::string& feature) {
  return Bytes(1, Bytes(1, name) + Bytes(2, feature));
}
std::string ExampleOf(const std::string& entries) { return Bytes(1, entries); }

std::vector<float> Floats(const FeatureView& f) {
  std::vector<float> out(64);
  auto n = ReadFloats(f, out.data(), 64);
  EXPECT_OK(n.status());
  out.resize(n.ok() ? *n : 0);
  return out;
}
std::vector<int64_t> Int64s(const FeatureView& f) {
  std::vector<int64_t> out(64);
  auto n = ReadInt64s(f, out.data(), 64);
  EXPECT_OK(n.status());
  out.resize(n.ok() ? *n : 0);
  return out;
}
std::vector<std::string> Strings(const FeatureView& f) {
  std::vector<std::string> out;
  EXPECT_OK(ReadBytes(f, [&](absl::string_view s) { out.emplace_back(s); }).status());
  return out;
}

TEST(ExampleParserTest, ReadsWhatProtobufWrites) {
  v1::Example e;
  auto& m = *e.mutable_features()->mutable_feature();
  for (float v : {0.5f, -1.25f, 3e38f, 0.0f}) m["image"].mutable_float_list()->add_value(v);
  for (int64_t v : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min(), int64_t{300}}) {
    m["ids"].mutable_int64_list()->add_value(v);
  }
  for (const char* v : {"a", "", "words with spaces", "\xff\x00z"}) {
    m["tokens"].mutable_bytes_list()->add_value(v);
  }
  m["label"].mutable_int64_list()->add_value(7);
  m["empty"];                                       // a Feature with no list
  const std::string bytes = e.SerializeAsString();  // the views point into it
  ParsedExample parsed;
  ASSERT_OK(parsed.Parse(bytes));
  EXPECT_EQ(parsed.features().size(), 5u);
  ASSERT_NE(parsed.Find("image"), nullptr);
  EXPECT_EQ(parsed.Find("image")->kind, ListKind::kFloat);
  EXPECT_EQ(Floats(*parsed.Find("image")), (std::vector<float>{0.5f, -1.25f, 3e38f, 0.0f}));
  EXPECT_EQ(Int64s(*parsed.Find("ids")),
            (std::vector<int64_t>{0, -1, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), 300}));
  EXPECT_EQ(Strings(*parsed.Find("tokens")),
            (std::vector<std::string>{"a", "", "words with spaces", "\xff"}));
  EXPECT_EQ(Int64s(*parsed.Find("label")), std::vector<int64_t>{7});
  EXPECT_EQ(parsed.Find("empty")->kind, ListKind::kNone);
  EXPECT_EQ(parsed.Find("absent"), nullptr);

  ASSERT_OK(parsed.Parse(""));  // an empty Example has no features
  EXPECT_TRUE(parsed.features().empty());
}

TEST(ExampleParserTest, ReadsUnpackedListsAndCapsWhatItCopies) {
  const std::string floats = Bytes(2, Fixed32(1, 1.5f) + Fixed32(1, -2.0f) + Fixed32(1, 4.0f));
  const std::string ints = Bytes(3, Varint(1 << 3 | 0) + Varint(5) + Varint(1 << 3 | 0) +
                                        Varint(static_cast<uint64_t>(int64_t{-3})));
  const std::string bytes = ExampleOf(Entry("f", floats) + Entry("i", ints));
  ParsedExample parsed;
  ASSERT_OK(parsed.Parse(bytes));
  EXPECT_EQ(Floats(*parsed.Find("f")), (std::vector<float>{1.5f, -2.0f, 4.0f}));
  EXPECT_EQ(Int64s(*parsed.Find("i")), (std::vector<int64_t>{5, -3}));
  // The count is every value; only `capacity` are copied.
  float two[2] = {0, 0};
  ASSERT_OK_AND_ASSIGN(int64_t n, ReadFloats(*parsed.Find("f"), two, 2));
  EXPECT_EQ(n, 3);
  EXPECT_EQ(two[1], -2.0f);
  ASSERT_OK_AND_ASSIGN(n, ReadInt64s(*parsed.Find("i"), nullptr, 0));
  EXPECT_EQ(n, 2);
}

// Protobuf's merge rules, checked against the generated parser on the same
// bytes.
TEST(ExampleParserTest, MergesAsProtobufDoes) {
  v1::Example a, b;
  (*a.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(1);
  (*a.mutable_features()->mutable_feature())["y"].mutable_int64_list()->add_value(2);
  (*b.mutable_features()->mutable_feature())["x"].mutable_int64_list()->add_value(9);
  // Two Examples back to back are one: the later "x" wins.
  const std::string both = a.SerializeAsString() + b.SerializeAsString();
  v1::Example merged;
  ASSERT_TRUE(merged.ParseFromString(both));
  ParsedExample parsed;
  ASSERT_OK(parsed.Parse(both));
  ASSERT_EQ(merged.features().feature().at("x").kind_case(), v1::Feature::kInt64List);
  EXPECT_EQ(parsed.Find("x")->kind, ListKind::kInt64);
  EXPECT_EQ(Int64s(*parsed.Find("x")), std::vector<int64_t>{9});
  EXPECT_EQ(Int64s(*parsed.Find("y")), std::vector<int64_t>{2});

  // In one Feature: a list in two pieces is their concatenation, and a
  // kind set later replaces the one before.
  v1::FloatList p1, p2;
  p1.add_value(1);
  p2.add_value(2);
  p2.add_value(3);
  v1::Int64List q;
  q.add_value(4);
  const std::string pieces = Bytes(2, p1.SerializeAsString()) + Bytes(2, p2.SerializeAsString());
  const std::string switched = Bytes(2, p1.SerializeAsString()) + Bytes(3, q.SerializeAsString()) +
                               Bytes(2, p2.SerializeAsString()) + Bytes(2, p1.SerializeAsString());
  const std::string bytes = ExampleOf(Entry("p", pieces) + Entry("s", switched));
  ASSERT_TRUE(merged.ParseFromString(bytes));
  ASSERT_OK(parsed.Parse(bytes));
  const auto& want_p = merged.features().feature().at("p").float_list().value();
  const auto& want_s = merged.features().feature().at("s").float_list().value();
  EXPECT_EQ(Floats(*parsed.Find("p")), std::vector<float>(want_p.begin(), want_p.end()));
  EXPECT_EQ(Floats(*parsed.Find("s")), std::vector<float>(want_s.begin(), want_s.end()));
  EXPECT_EQ(Floats(*parsed.Find("s")), (std::vector<float>{2, 3, 1}));
}

TEST(ExampleParserTest, SkipsUnknownFields) {
  // Unknown numbers, and known numbers with another wire type, as protobuf.
  const std::string unknown = Varint(7 << 3 | 0) + Varint(12345) + Varint(8 << 3 | 1) +
                              std::string(8, 'x') + Bytes(9, "whatever") + Varint(1 << 3 | 0) +
                              Varint(3) + Varint(1 << 3 | 5) + "abcd";
  // In a float_list, field 1 as a varint is unknown too.
  // And float_list's number as a fixed32 beside the list is unknown.
  const std::string feature =
      unknown + Bytes(2, Fixed32(1, 2.5f) + Varint(1 << 3 | 0) + Varint(7) + Bytes(9, "x")) +
      Fixed32(2, 9.0f);
  const std::string bytes = unknown + ExampleOf(unknown + Entry("f", feature)) + unknown;
  ParsedExample parsed;
  ASSERT_OK(parsed.Parse(bytes));
  EXPECT_EQ(Floats(*parsed.Find("f")), std::vector<float>{2.5f});
}

TEST(ExampleParserTest, SkipsGroupsAsProtobufDoes) {
  // A group of field N: its start tag, what it holds (a nested group among
  // it), its end tag. Unknown at every level, so protobuf skips it whole.
  auto group = [](int n) {
    return Varint(n << 3 | 3) + Varint(1 << 3 | 0) + Varint(5) + Varint(2 << 3 | 3) +
           Bytes(1, "in") + Varint(2 << 3 | 4) + Varint(n << 3 | 4);
  };
  // In an Int64List among packed values, in a Feature, in an entry, in
  // Features and in the Example.
  const std::string feature =
      group(3) + Bytes(3, Varint(1 << 3 | 0) + Varint(4) + group(1) + Bytes(1, Varint(9)));
  const std::string bytes =
      group(1) + ExampleOf(group(1) + Bytes(1, group(2) + Bytes(1, "ids") + Bytes(2, feature)));
  ParsedExample parsed;
  ASSERT_OK(parsed.Parse(bytes));
  ASSERT_NE(parsed.Find("ids"), nullptr);
  EXPECT_EQ(Int64s(*parsed.Find("ids")), (std::vector<int64_t>{4, 9}));
  v1::Example theirs;
  ASSERT_TRUE(theirs.ParseFromString(bytes));
  const auto& list = theirs.features().feature().at("ids").int64_list().value();
  EXPECT_EQ(std::vector<int64_t>(list.begin(), list.end()), (std::vector<int64_t>{4, 9}));
}

TEST(ExampleParserTest, NamesTheByteOfBadInput) {
  ParsedExample parsed;
  // Features says 5 bytes; 1 follows.
  EXPECT_EQ(parsed.Parse(std::string("\x0a\x05\x0a", 3)).message(),
            "Example at byte 0: field 1 says 5 bytes but 1 remain");
  // A tag cut short.
  EXPECT_EQ(parsed.Parse(std::string("\x0a\x01\x80", 3)).message(),
            "Example at byte 2: a field tag runs past the end");
  // An end-group tag with no group open; a group never ended; a group
  // ended by another field's tag; wire type 6.
  EXPECT_EQ(parsed.Parse(std::string("\x0c", 1)).message(),
            "Example at byte 0: field 1 ends a group that was not started");
  EXPECT_EQ(parsed.Parse(std::string("\x0b\x08\x01", 3)).message(),
            "Example at byte 0: field 1 starts a group that does not end");
  EXPECT_EQ(parsed.Parse(std::string("\x0b\x08\x01\x14", 4)).message(),
            "Example at byte 3: field 2 ends the group of field 1");
  EXPECT_EQ(parsed.Parse(std::string("\x0e", 1)).message(),
            "Example at byte 0: field 1 has wire type 6, which protobuf does not define");
  // Groups nested past protobuf's recursion limit.
  EXPECT_EQ(parsed.Parse(std::string(101, '\x0b') + std::string(101, '\x0c')).message(),
            "Example at byte 100: groups nested more than 100 deep");
  // A feature's value in two pieces.
  const std::string twice = ExampleOf(Bytes(1, Bytes(1, "f") + Bytes(2, "") + Bytes(2, "")));
  EXPECT_EQ(parsed.Parse(twice).message(),
            "Example at byte 9: a feature's value is given in pieces, which this reader does "
            "not merge");
  // Packed floats of 3 bytes, at the float_list's value field.
  const std::string odd = ExampleOf(Entry("f", Bytes(2, Bytes(1, "abc"))));
  ASSERT_OK(parsed.Parse(odd));
  float out[4];
  auto n = ReadFloats(*parsed.Find("f"), out, 4);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), "Example at byte " + std::to_string(odd.size() - 5) +
                                      ": packed floats of 3 bytes, not a multiple of 4");
  // A packed varint cut short.
  const std::string cut = ExampleOf(Entry("i", Bytes(3, Bytes(1, "\x81"))));
  ASSERT_OK(parsed.Parse(cut));
  int64_t ids[4];
  EXPECT_EQ(
      ReadInt64s(*parsed.Find("i"), ids, 4).status().message(),
      "Example at byte " + std::to_string(cut.size() - 1) + ": a packed int64 runs past its list");
}

}  // namespace
}  // namespace pstrain::data
