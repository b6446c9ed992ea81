#include "model/param_layout.h"

#include "gtest/gtest.h"

namespace pstrain::model {
namespace {

TEST(ParamLayoutTest, FlatVariablesFollowEachOtherAndTablesTakeNoRoom) {
  ParamLayout layout;
  VariableDef table{"emb/table", {1000, 8}};
  table.embedding = true;
  layout.AddTable(table);
  layout.AddFlat({"dense_0/kernel", {8, 4}}, 0, ParamRole::kKernel);
  layout.AddFlat({"dense_0/bias", {4}}, 0, ParamRole::kBias);
  layout.AddFlat({"dense_1/kernel", {4, 3}}, 1, ParamRole::kKernel);
  layout.AddFlat({"dense_1/bias", {3}}, 1, ParamRole::kBias);
  EXPECT_EQ(layout.num_parameters(), 32 + 4 + 12 + 3);
  EXPECT_EQ(layout.offsets(), (std::vector<int64_t>{51, 0, 32, 36, 48}));
  EXPECT_EQ(layout.num_layers(), 2);
  EXPECT_EQ(layout.LayerVariables(1), (std::vector<int>{3, 4}));
  EXPECT_EQ(layout.OffsetOf(1, ParamRole::kKernel), 36);
  EXPECT_EQ(layout.OffsetOf(0, ParamRole::kBias), 32);
  EXPECT_EQ(layout.OffsetOf(0, ParamRole::kTable), -1);
  EXPECT_EQ(layout.OffsetOf(2, ParamRole::kKernel), -1);
  EXPECT_EQ(layout.LayerOffsets(ParamRole::kKernel), (std::vector<int64_t>{0, 36}));
  EXPECT_EQ(layout.LayerOffsets(ParamRole::kBias), (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(layout.FirstTable(), 0);
  EXPECT_FALSE(layout.in_flat(0));
  EXPECT_EQ(layout.layer_of(0), -1);
  EXPECT_EQ(layout.role_of(4), ParamRole::kBias);
  EXPECT_EQ(layout.Describe(),
            "emb/table [1000, 8] table, by row\n"
            "dense_0/kernel [8, 4] layer 0 kernel at 0\n"
            "dense_0/bias [4] layer 0 bias at 32\n"
            "dense_1/kernel [4, 3] layer 1 kernel at 36\n"
            "dense_1/bias [3] layer 1 bias at 48");
}

TEST(ParamLayoutTest, ALayerMayHoldAnyVariablesInAnyOrder) {
  // A layer of another kind (bias first, an extra scale) needs nothing but
  // its entries.
  ParamLayout layout;
  layout.AddFlat({"norm/bias", {5}}, 0, ParamRole::kBias);
  layout.AddFlat({"norm/kernel", {5}}, 0, ParamRole::kKernel);
  EXPECT_EQ(layout.OffsetOf(0, ParamRole::kKernel), 5);
  EXPECT_EQ(layout.OffsetOf(0, ParamRole::kBias), 0);
  EXPECT_EQ(layout.FirstTable(), -1);
}

}  // namespace
}  // namespace pstrain::model
