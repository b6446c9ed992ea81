#include "base/payload.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// `bytes` cut into pieces of `chunk` bytes, kept in `pieces`.
Payload InPieces(const std::string& bytes, size_t chunk, std::vector<std::string>* pieces) {
  Payload p;
  for (size_t i = 0; i < bytes.size(); i += chunk) pieces->push_back(bytes.substr(i, chunk));
  for (const std::string& s : *pieces) p.Append(s.data(), static_cast<int64_t>(s.size()));
  return p;
}

TEST(PayloadTest, CopiesAcrossPiecesAndSkipsEmptyOnes) {
  std::vector<std::string> pieces;
  Payload p = InPieces("abcdefghij", 3, &pieces);
  p.Append(nullptr, 0);
  EXPECT_EQ(p.size(), 10);
  std::string out(6, '?');
  p.Copy(2, 6, out.data());
  EXPECT_EQ(out, "cdefgh");
  std::string streamed(10, '?');
  p.Stream(0, 10, streamed.data());
  EXPECT_EQ(streamed, "abcdefghij");
  std::vector<std::pair<size_t, int64_t>> seen;
  p.ForEachPiece(4, 5, [&](size_t piece, int64_t within, int64_t len) {
    seen.emplace_back(piece, within * 10 + len);
  });
  // Bytes 4..8: piece 1 from byte 1 (2 bytes), piece 2 (3 bytes).
  EXPECT_EQ(seen, (std::vector<std::pair<size_t, int64_t>>{{1, 12}, {2, 3}}));
  p.Clear();
  EXPECT_EQ(p.size(), 0);
  EXPECT_FALSE(p.writable());
}

TEST(PayloadTest, FloatRunsComeInPlaceAndASplitFloatComesAlone) {
  std::vector<float> values(50);
  for (int i = 0; i < 50; ++i) values[i] = 0.5f * static_cast<float>(i);
  std::vector<std::string> pieces;
  // One byte before the floats, pieces of 30 bytes: floats straddle them.
  Payload p = InPieces("x" + Bytes(values), 30, &pieces);
  std::vector<float> read(50, -1);
  std::vector<int64_t> counts;
  p.ForEachFloatRun(1, 50, 4, [&](int64_t first, const char* bytes, int64_t count) {
    std::memcpy(&read[first], bytes, count * 4);
    counts.push_back(count);
  });
  EXPECT_EQ(read, values);
  for (int64_t c : counts) EXPECT_LE(c, 4);
  EXPECT_NE(std::find(counts.begin(), counts.end(), 1), counts.end());
}

TEST(PayloadTest, RewritingReachesBothPiecesOfASplitFloat) {
  std::vector<float> values(20, 1.0f);
  std::vector<std::string> pieces;
  Payload p = InPieces("xyz" + Bytes(values), 7, &pieces);
  p.set_writable(true);
  p.RewriteFloatRuns(3, 20, 100, [](int64_t first, char* bytes, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const float v = static_cast<float>(first + i);
      std::memcpy(bytes + 4 * i, &v, 4);
    }
  });
  std::string all;
  for (const std::string& s : pieces) all += s;
  std::vector<float> expected(20);
  for (int i = 0; i < 20; ++i) expected[i] = static_cast<float>(i);
  EXPECT_EQ(all, "xyz" + Bytes(expected));
}

}  // namespace
}  // namespace pstrain
