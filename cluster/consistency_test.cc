#include "cluster/consistency.h"

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ConsistencyTest, ParsesEveryMode) {
  ASSERT_OK_AND_ASSIGN(Consistency a, ParseConsistency("async"));
  EXPECT_EQ(a.mode, Consistency::Mode::kAsync);
  ASSERT_OK_AND_ASSIGN(Consistency s, ParseConsistency("sync"));
  EXPECT_EQ(s.mode, Consistency::Mode::kSync);
  ASSERT_OK_AND_ASSIGN(Consistency p, ParseConsistency("ssp:3"));
  EXPECT_EQ(p.mode, Consistency::Mode::kSsp);
  EXPECT_EQ(p.staleness, 3);
  EXPECT_EQ(p.ToString(), "ssp:3");
  EXPECT_EQ(s.ToString(), "sync");
}

TEST(ConsistencyTest, RejectsOthersNamingTheText) {
  for (const char* bad : {"", "Sync", "ssp", "ssp:", "ssp:-1", "ssp:x", "ssp:2000000"}) {
    auto c = ParseConsistency(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message(),
              std::string("consistency \"") + bad +
                  "\" is not one of async, sync, ssp:S (S an integer from 0 to 1000000)");
  }
}

}  // namespace
}  // namespace pstrain
