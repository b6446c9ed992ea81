// LocalTable against the real thing: the same pushes to a table on two real
// PS (over loopback, through PsClient) and to a LocalTable must leave the
// same rows, bit for bit, whatever PS owns them.
#include "train/local_table.h"

#include <random>

#include "client/ps_client.h"
#include "common/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain::train {
namespace {

TEST(LocalTableTest, MatchesThePsRowForRowUnderLazyAdam) {
  VariableDef table{"words/embeddings", {1000, 6}};
  table.embedding = true;
  table.consistency = "async";
  table.initializer = "uniform:0.1";
  const OptimizerSpec adam{"adam", 0.01f};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ps::testing::LocalPs> ps, ps::testing::LocalPs::Start(2));
  ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement({table}, 2));
  client::PsClientOptions options;
  options.ps_addresses = ps->addresses();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::PsClient> client,
                       client::PsClient::Create(options, placement));
  ASSERT_OK(client->WaitUntilReady(absl::Seconds(5), false));
  client::CreateOptions create;
  create.optimizer = adam;
  create.seed = 9;
  ASSERT_OK(client->CreateVariables({}, {0}, create).status());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalTable> local, LocalTable::Create(table, 9, &adam));

  std::mt19937 rng(4);
  std::uniform_int_distribution<int64_t> id(0, 40);
  std::normal_distribution<float> g(0, 1);
  for (int push = 0; push < 5; ++push) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 41; ++i) {
      if (id(rng) < 15) ids.push_back(i);  // some rows each time, some rows often
    }
    std::vector<float> grads(ids.size() * 6);
    for (float& v : grads) v = g(rng);
    ASSERT_OK(client->PushRows(table.name, ids, grads.data()));
    ASSERT_OK(local->Apply(ids, grads.data()));
  }
  // Rows pushed and rows never touched (41..59) read the same.
  std::vector<int64_t> all;
  for (int64_t i = 0; i < 60; ++i) all.push_back(i);
  std::vector<float> from_ps(60 * 6), from_local(60 * 6);
  ASSERT_OK(client->PullRows(table.name, all, from_ps.data()));
  ASSERT_OK(local->Read(all, from_local.data()));
  EXPECT_EQ(from_ps, from_local);
  EXPECT_LE(local->rows(), 41);
  EXPECT_NE(from_local[0], 0.0f);
}

TEST(LocalTableTest, ErrorsAndReadOnlyTables) {
  VariableDef table{"t", {10, 2}};
  table.embedding = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalTable> t, LocalTable::Create(table, 1, nullptr));
  float out[4];
  EXPECT_EQ(t->Read({3, 10}, out).message(), "t: id 10 is outside [0, 10)");
  const float grads[2] = {1, 1};
  EXPECT_EQ(t->Apply({3}, grads).message(), "t is read-only here");
  const float row[2] = {5, 6};
  ASSERT_OK(t->Set(3, row));
  ASSERT_OK(t->Read({3}, out));
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 6);
  EXPECT_EQ(LocalTable::Create({"d", {10, 2}}, 1, nullptr).status().message(),
            "d is not an embedding table [vocabulary, dim]");
}

}  // namespace
}  // namespace pstrain::train
