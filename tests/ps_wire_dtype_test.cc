// bfloat16 on the wire (PsClientOptions::bfloat16_wire, the job flag
// --wire_dtype=bfloat16) against a real PS, over each transport a worker
// may use: what crosses is rounded to bfloat16, what the PS keeps and
// updates stays float32, and dense slices and table rows alike.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "base/bfloat16.h"
#include "cluster/placement.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain {
namespace {

constexpr int kElements = 3000;
constexpr int kDim = 8;

float Round(float x) { return FromBfloat16(ToBfloat16(x)); }

struct Transport {
  std::string name;
  bool tcp_frames;
  bool shared_memory;
};

class PsWireDtypeTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(ps_, ps::testing::LocalPs::Start(1));
    VariableDef emb{"emb", {1000, kDim}};
    emb.embedding = true;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement({{"w", {kElements}}, emb}, 1));
    // Values bfloat16 cannot hold exactly.
    init_.resize(kElements);
    for (int i = 0; i < kElements; ++i) init_[i] = 1.0f / 3 + 0.001f * static_cast<float>(i);
    client::CreateOptions create;
    create.optimizer = {"sgd", 0.5f};
    ASSERT_OK(client::PsAdmin(&Client(false)->control()).CreateVariables(placement_, init_, {0}, create).status());
  }

  std::unique_ptr<client::PsClient> Client(bool bfloat16) {
    client::PsClientOptions o;
    o.ps_addresses = ps_->addresses();
    o.rpc_deadline = absl::Seconds(5);
    o.tcp_frames = GetParam().tcp_frames;
    o.shared_memory = GetParam().shared_memory;
    o.bfloat16_wire = bfloat16;
    auto c = client::PsClient::Create(o, placement_);
    EXPECT_OK(c.status());
    return *std::move(c);
  }

  std::unique_ptr<ps::testing::LocalPs> ps_;
  Placement placement_;
  std::vector<float> init_;
};

TEST_P(PsWireDtypeTest, DenseValuesCrossRoundedAndThePsKeepsFloat32) {
  auto narrow = Client(true);
  auto full = Client(false);
  std::vector<float> pulled(kElements);
  ASSERT_OK(narrow->PullAll(pulled.data(), {0}).status());
  for (int i = 0; i < kElements; ++i) ASSERT_EQ(pulled[i], Round(init_[i])) << i;

  std::vector<float> grads(kElements);
  for (int i = 0; i < kElements; ++i) grads[i] = 0.01f * static_cast<float>(i % 97) + 1e-5f;
  // Pushed rounded; applied in float32 to the float32 values; answered
  // rounded again.
  ASSERT_OK(narrow->PushPullAll(grads.data(), pulled.data(), {0}).status());
  std::vector<float> kept(kElements);
  ASSERT_OK(full->PullAll(kept.data(), {0}).status());
  for (int i = 0; i < kElements; ++i) {
    ASSERT_FLOAT_EQ(kept[i], init_[i] - 0.5f * Round(grads[i])) << i;
    ASSERT_EQ(pulled[i], Round(kept[i])) << i;
  }
  // A plain push, then a plain pull, the same way.
  ASSERT_OK(narrow->PushAll(grads.data(), {0}));
  ASSERT_OK(narrow->PullAll(pulled.data(), {0}).status());
  ASSERT_OK(full->PullAll(kept.data(), {0}).status());
  for (int i = 0; i < kElements; ++i) {
    ASSERT_FLOAT_EQ(kept[i], init_[i] - Round(grads[i])) << i;
    ASSERT_EQ(pulled[i], Round(kept[i])) << i;
  }
}

TEST_P(PsWireDtypeTest, TableRowsCrossRoundedAndThePsKeepsFloat32) {
  auto narrow = Client(true);
  auto full = Client(false);
  const std::vector<int64_t> ids = {3, 999, 42};
  std::vector<float> exact(ids.size() * kDim), rounded(ids.size() * kDim);
  ASSERT_OK(full->PullRows("emb", ids, exact.data()));
  ASSERT_OK(narrow->PullRows("emb", ids, rounded.data()));
  for (size_t i = 0; i < exact.size(); ++i) ASSERT_EQ(rounded[i], Round(exact[i])) << i;

  std::vector<float> grads(ids.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.1f / (1 + static_cast<float>(i));
  ASSERT_OK(narrow->PushRows("emb", ids, grads.data()));
  std::vector<float> after(exact.size());
  ASSERT_OK(full->PullRows("emb", ids, after.data()));
  for (size_t i = 0; i < exact.size(); ++i) {
    ASSERT_FLOAT_EQ(after[i], exact[i] - 0.5f * Round(grads[i])) << i;
  }
  ASSERT_OK(narrow->PullRows("emb", ids, rounded.data()));
  for (size_t i = 0; i < exact.size(); ++i) ASSERT_EQ(rounded[i], Round(after[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Transports, PsWireDtypeTest,
                         ::testing::Values(Transport{"tcp", true, false},
                                           Transport{"grpc", false, false},
                                           Transport{"shared_memory", true, true}),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pstrain
