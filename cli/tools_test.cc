#include "cli/tools.h"

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ToolsTest, PlacementTableShowsSlicesBytesPerPsAndImbalance) {
  ASSERT_OK_AND_ASSIGN(Placement p,
                       ComputePlacement({{"dense_0/kernel", {784, 256}}, {"dense_0/bias", {256}}}, 2));
  std::string table = PlacementTable(p);
  EXPECT_NE(table.find("dense_0/kernel               0/2      [0, 392)               401408    0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("dense_0/kernel               1/2      [392, 784)             401408    1"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("ps:0         402432 bytes   50.1%"), std::string::npos) << table;
  EXPECT_NE(table.find("total        803840 bytes; largest ps is 0.1% above the ideal 401920"),
            std::string::npos)
      << table;
}

TEST(ToolsTest, PlacementJsonIsParseable) {
  ASSERT_OK_AND_ASSIGN(Placement p, ComputePlacement({{"w", {10, 10}}}, 3));
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson(PlacementJson(p)));
  EXPECT_EQ(j.Find("num_ps")->number_value(), 3);
  ASSERT_EQ(j.Find("slices")->array_items().size(), 1u);
  EXPECT_EQ(j.Find("slices")->array_items()[0].Find("key")->string_value(), "w/part_0");
  EXPECT_EQ(j.Find("bytes_per_ps")->array_items()[0].number_value(), 400);
  EXPECT_NEAR(j.Find("imbalance_percent")->number_value(), 200.0, 1e-9);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(ToolsTest, StatusSumsSlicesPerVariableWithDropsAndStaleness) {
  v1::StatsResponse ps;
  ps.set_ps_index(1);
  ps.set_global_step(7);
  ps.set_resident_bytes(64 << 20);
  for (int part = 0; part < 2; ++part) {
    v1::SliceStats* s = ps.add_slices();
    s->set_key(absl::StrCat("w/part_", part));
    s->set_variable("w");
    s->set_consistency("sync");
    s->set_bytes(100);
    s->set_pushes(9);
    s->set_pulls(8);
    s->set_step(7 - part);
    s->set_dropped_stale(part);
    for (int b = 0; b < 9; ++b) s->add_staleness_histogram(b == 0 ? 8 : b == 1 ? part : 0);
  }
  const std::vector<HostPort> where = {{"127.0.0.1", 4001}};
  const std::string table = StatusTable(where, {ps});
  EXPECT_NE(table.find("ps:1 127.0.0.1:4001  global step 7  resident 64 MiB\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  w                        sync             200        18        16"
                       "        6        1  16 1 0 0 0 0 0 0 0\n"),
            std::string::npos)
      << table;
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson(StatusJson(where, {ps})));
  const Json& v = j.array_items()[0].Find("variables")->array_items()[0];
  EXPECT_EQ(v.Find("variable")->string_value(), "w");
  EXPECT_EQ(v.Find("dropped_stale")->number_value(), 1);
  EXPECT_EQ(v.Find("staleness_histogram")->array_items()[1].number_value(), 1);
  EXPECT_EQ(j.array_items()[0].Find("resident_bytes")->number_value(), 64 << 20);
}

}  // namespace
}  // namespace pstrain
