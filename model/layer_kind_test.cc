#include "model/layer_kind.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/model_config.pb.h"

namespace pstrain::model {
namespace {

TEST(LayerKindsTest, EveryKindHasOneDefinitionFoundByItsName) {
  std::set<std::string> names, classes;
  for (int k = 0; k < kNumLayerKinds; ++k) {
    const LayerKind kind = static_cast<LayerKind>(k);
    const LayerKindDef& def = KindDef(kind);
    EXPECT_EQ(def.kind(), kind);
    EXPECT_TRUE(names.insert(def.name()).second) << def.name();
    EXPECT_TRUE(classes.insert(def.keras_class()).second) << def.keras_class();
    EXPECT_EQ(FindKindDef(def.name()), &def);
    EXPECT_STREQ(LayerKindName(kind), def.name());
  }
  EXPECT_EQ(AllKindDefs().size(), static_cast<size_t>(kNumLayerKinds));
  EXPECT_EQ(FindKindDef("conv3d"), nullptr);
}

TEST(LayerKindsTest, EveryLayerTypeOfTheConfigIsAKind) {
  const auto* type = v1::LayerConfig::descriptor();
  int kinds = 0;
  for (int f = 0; f < type->field_count(); ++f) {
    const auto* field = type->field(f);
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) continue;
    // The embeddings come before the layers (model/embeddings.h).
    if (field->name() == "embedding" || field->name() == "embedding_bag") continue;
    EXPECT_NE(FindKindDef(field->name()), nullptr) << field->name();
    ++kinds;
  }
  EXPECT_EQ(kinds, kNumLayerKinds);
}

TEST(LayerKindsTest, KindsDeclareTheirVariablesInTheFlatArraysOrder) {
  LayerSpec conv;
  conv.kind = LayerKind::kConv2D;
  conv.units = 8;
  conv.window = {3, 3};
  const std::vector<LayerVariable> vars = KindDef(conv.kind).Variables(conv, {10, 10, 4});
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].suffix, "kernel");
  EXPECT_EQ(vars[0].shape, (Shape{3, 3, 4, 8}));
  EXPECT_EQ(vars[0].init, LayerVariable::Init::kKernel);
  EXPECT_EQ(vars[1].suffix, "bias");
  EXPECT_EQ(vars[1].role, ParamRole::kBias);
  conv.use_bias = false;
  EXPECT_EQ(KindDef(conv.kind).Variables(conv, {10, 10, 4}).size(), 1u);

  LayerSpec bn;
  bn.kind = LayerKind::kBatchNormalization;
  bn.center = false;
  const std::vector<LayerVariable> stats = KindDef(bn.kind).Variables(bn, {5, 5, 6});
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].suffix, "gamma");
  EXPECT_FALSE(stats[0].moving);
  EXPECT_EQ(stats[1].suffix, "moving_mean");
  EXPECT_TRUE(stats[1].moving);
  EXPECT_EQ(stats[2].suffix, "moving_variance");
  EXPECT_EQ(stats[2].init, LayerVariable::Init::kOnes);
  EXPECT_EQ(stats[2].shape, (Shape{6}));

  LayerSpec pool;
  pool.kind = LayerKind::kMaxPool2D;
  EXPECT_TRUE(KindDef(pool.kind).Variables(pool, {4, 4, 2}).empty());
  EXPECT_EQ(KindDef(pool.kind).kernel_name(), nullptr);
  EXPECT_STREQ(KindDef(LayerKind::kDepthwiseConv2D).kernel_name(), "depthwise_kernel");
}

TEST(LayerKindsTest, TheCudaLayersSayWhatTheyDoNotCompute) {
  PstrainCudaLayer d{};
  LayerSpec dense;
  dense.kind = LayerKind::kDense;
  dense.units = 4;
  EXPECT_TRUE(KindDef(dense.kind).DescribeCuda(dense, {3}, &d).ok());
  EXPECT_EQ(d.kind, kPstrainCudaDense);
  EXPECT_EQ(d.units, 4);
  dense.use_bias = false;
  EXPECT_EQ(KindDef(dense.kind).DescribeCuda(dense, {3}, &d).message(), "a layer without a bias");
  dense.use_bias = true;
  dense.activation = Activation::kTanh;
  EXPECT_EQ(KindDef(dense.kind).DescribeCuda(dense, {3}, &d).message(), "activation tanh");

  LayerSpec pool;
  pool.kind = LayerKind::kMaxPool1D;
  pool.window = {1, 2};
  pool.stride = {1, 2};
  ASSERT_TRUE(KindDef(pool.kind).DescribeCuda(pool, {6, 3}, &d).ok());
  EXPECT_EQ(d.kind, kPstrainCudaMaxPool);
  EXPECT_EQ(d.window.h, 1);
  EXPECT_EQ(d.window.w, 6);
  EXPECT_EQ(d.window.ow, 3);

  LayerSpec bn;
  bn.kind = LayerKind::kBatchNormalization;
  const absl::Status s = KindDef(bn.kind).DescribeCuda(bn, {3}, &d);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "batch_normalization");
}

TEST(LayerKindsTest, MergesTakeSeveralInputsAndTheRestOne) {
  LayerSpec add;
  add.kind = LayerKind::kAdd;
  EXPECT_TRUE(add.merges());
  EXPECT_EQ(LayerOutputShapeForInputs(add, {{4, 2}}).status().message(),
            "add needs at least two inputs (name them in inputs), not 1");
  EXPECT_EQ(*LayerOutputShapeForInputs(add, {{4, 2}, {4, 2}, {4, 2}}), (Shape{4, 2}));
  LayerSpec relu;
  relu.kind = LayerKind::kReLU;
  relu.activation = Activation::kRelu;
  EXPECT_FALSE(relu.merges());
  EXPECT_EQ(LayerOutputShapeForInputs(relu, {{4}, {4}}).status().message(),
            "relu reads one input, not 2");
  EXPECT_TRUE(KindDef(LayerKind::kFlatten).aliases_input());
  EXPECT_FALSE(KindDef(LayerKind::kDropout).aliases_input());
}

}  // namespace
}  // namespace pstrain::model
