#include "cli/tools.h"

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
