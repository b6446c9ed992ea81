#include "cluster/initial_stream.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The definition: one engine seeded with the job's seed, one draw per
// element, the limit of each variable in turn.
std::vector<float> Drawn(uint64_t seed, const std::vector<std::pair<float, int>>& pieces) {
  std::mt19937_64 rng(seed);
  std::vector<float> out;
  for (const auto& [limit, n] : pieces) {
    std::uniform_real_distribution<float> dist(-limit, limit);
    for (int i = 0; i < n; ++i) out.push_back(dist(rng));
  }
  return out;
}

TEST(InitialStreamTest, SlicesFilledApartAreTheWholeStream) {
  const std::vector<float> whole = Drawn(7, {{0.5f, 40}, {0.25f, 24}});
  std::vector<float> got(64, -9.0f);
  InitialStream stream(7);
  // A PS holding rows of both variables fills its slices, some skipped.
  stream.Fill(10, 0.5f, 20, got.data() + 10);
  EXPECT_EQ(stream.position(), 30);
  stream.Fill(40 + 4, 0.25f, 20, got.data() + 44);
  for (int i = 10; i < 30; ++i) EXPECT_EQ(got[i], whole[i]) << i;
  for (int i = 44; i < 64; ++i) EXPECT_EQ(got[i], whole[i]) << i;
  // Back to the start: drawn again from a fresh engine.
  stream.Fill(0, 0.5f, 10, got.data());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i], whole[i]) << i;
  EXPECT_EQ(got[35], -9.0f);  // never filled
}

TEST(InitialStreamTest, TheSpecReadsBackAsTheSameLimitAndDraw) {
  // Glorot's limit for a 784 x 128 kernel, as the model computes it.
  const float glorot = std::sqrt(6.0f / static_cast<float>(784 + 128));
  const std::string spec = StreamInitializer({glorot, 100480});
  EXPECT_TRUE(IsStreamInitializer(spec));
  ASSERT_OK_AND_ASSIGN(StreamPlace place, ParseStreamInitializer(spec));
  EXPECT_EQ(place.limit, glorot);
  EXPECT_EQ(place.first_draw, 100480);
  EXPECT_FALSE(IsStreamInitializer("uniform:0.05"));
  for (const char* bad : {"stream:", "stream:0.1", "stream:-1@0", "stream:0.1@-2", "stream:x@1",
                          "stream:inf@1"}) {
    absl::StatusOr<StreamPlace> parsed = ParseStreamInitializer(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("\"") + bad + "\" is not stream:A@K (A >= 0, K >= 0)");
  }
}

}  // namespace
}  // namespace pstrain
