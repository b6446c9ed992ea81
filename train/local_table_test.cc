// LocalTable against the real thing: the same pushes to a table on two real
// PS (over loopback, through PsClient) and to a LocalTable must leave the
// same rows, bit for bit, whatever PS owns them.
#include "train/local_table.h"

#include <cmath>
#include <random>

#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain::train {
namespace {

// A client of `ps` holding `variables` (the dense ones from `init` at
// `offsets`), created with `optimizer` and `seed`.
absl::StatusOr<std::unique_ptr<client::PsClient>> Connect(const ps::testing::LocalPs& ps,
                                                          const std::vector<VariableDef>& variables,
                                                          const std::vector<float>& init,
                                                          const std::vector<int64_t>& offsets,
                                                          const OptimizerSpec& optimizer,
                                                          uint64_t seed) {
  absl::StatusOr<Placement> placement = ComputePlacement(variables, 2);
  if (!placement.ok()) return placement.status();
  client::PsClientOptions options;
  options.ps_addresses = ps.addresses();
  absl::StatusOr<std::unique_ptr<client::PsClient>> client =
      client::PsClient::Create(options, *placement);
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->WaitUntilReady(absl::Seconds(5), false); !s.ok()) return s;
  client::CreateOptions create;
  create.optimizer = optimizer;
  create.seed = seed;
  if (absl::Status s = client::PsAdmin(&(*client)->control()).CreateVariables(*placement, init, offsets, create).status(); !s.ok()) {
    return s;
  }
  return client;
}

TEST(LocalTableTest, MatchesThePsRowForRowUnderLazyAdam) {
  VariableDef table{"words/embeddings", {1000, 6}};
  table.embedding = true;
  table.consistency = Consistency::Async();
  table.initializer = "uniform:0.1";
  const OptimizerSpec adam{"adam", 0.01f};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ps::testing::LocalPs> ps, ps::testing::LocalPs::Start(2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::PsClient> client,
                       Connect(*ps, {table}, {}, {0}, adam, 9));
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

// Several tables moved in one exchange per PS (PsClient's multi-table
// PullRows and PushRows) against LocalTables holding the same tables.
TEST(LocalTableTest, SeveralTablesInOneExchangeMatchLocalTables) {
  VariableDef user{"user/embeddings", {500, 4}}, item{"item/embeddings", {60, 3}};
  for (VariableDef* t : {&user, &item}) {
    t->embedding = true;
    t->consistency = Consistency::Async();
  }
  const OptimizerSpec adagrad{"adagrad", 0.1f};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ps::testing::LocalPs> ps, ps::testing::LocalPs::Start(2));
  // A dense variable among them: LocalTables keeps only the tables.
  const std::vector<VariableDef> variables = {{"dense/kernel", {3, 2}}, user, item};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::PsClient> client,
                       Connect(*ps, variables, std::vector<float>(6, 0.5f), {0, 6}, adagrad, 3));
  ASSERT_OK_AND_ASSIGN(LocalTables local, LocalTables::Create(variables, 3, &adagrad));
  ASSERT_EQ(local.size(), 2);
  EXPECT_EQ(local[1].name(), "item/embeddings");
  EXPECT_EQ(local.Find("dense/kernel"), nullptr);

  // Ids on both PS in each table; the item table only in the second push.
  const std::vector<int64_t> user_ids = {7, 1, 499, 20, 3};
  const std::vector<int64_t> item_ids = {59, 0, 11};
  std::vector<float> user_grads(5 * 4), item_grads(3 * 3);
  for (size_t i = 0; i < user_grads.size(); ++i) user_grads[i] = 0.1f * i - 0.7f;
  for (size_t i = 0; i < item_grads.size(); ++i) item_grads[i] = 0.2f * i - 0.5f;
  const std::vector<client::PsClient::TableRows> first = {
      {"user/embeddings", user_ids, nullptr, user_grads.data()}};
  ASSERT_OK(client->PushRows(first));
  ASSERT_OK(local[0].Apply(user_ids, user_grads.data()));
  const std::vector<client::PsClient::TableRows> both = {
      {"user/embeddings", user_ids, nullptr, user_grads.data()},
      {"item/embeddings", item_ids, nullptr, item_grads.data()}};
  ASSERT_OK(client->PushRows(both));
  ASSERT_OK(local[0].Apply(user_ids, user_grads.data()));
  ASSERT_OK(local[1].Apply(item_ids, item_grads.data()));

  // Pulled together, and rows never pushed (2, 30) too.
  const std::vector<int64_t> user_read = {2, 7, 499, 1}, item_read = {11, 30, 59, 0};
  std::vector<float> ps_user(4 * 4), ps_item(4 * 3), local_user(4 * 4), local_item(4 * 3);
  const std::vector<client::PsClient::TableRows> pull = {
      {"item/embeddings", item_read, ps_item.data(), nullptr},
      {"user/embeddings", user_read, ps_user.data(), nullptr}};
  ASSERT_OK(client->PullRows(pull));
  ASSERT_OK(local.Read("user/embeddings", user_read, local_user.data()));
  ASSERT_OK(local.Read("item/embeddings", item_read, local_item.data()));
  EXPECT_EQ(ps_user, local_user);
  EXPECT_EQ(ps_item, local_item);
  EXPECT_EQ(local.Read("tags/embeddings", item_read, local_item.data()).message(),
            "no embedding table tags/embeddings");
  const std::vector<client::PsClient::TableRows> unknown = {
      {"tags/embeddings", item_read, ps_item.data(), nullptr}};
  EXPECT_EQ(client->PullRows(unknown).message(),
            "the model has no embedding table \"tags/embeddings\"");
}

// A table push is as stale as the updates the table took on that PS since
// the rows were pulled: 0 right after a pull, one more for each push
// without one in between (and not the table's whole age).
TEST(LocalTableTest, TableStalenessCountsUpdatesSinceThePull) {
  VariableDef user{"user/embeddings", {500, 4}};
  user.embedding = true;
  user.consistency = Consistency::Async();
  const OptimizerSpec sgd{"sgd", 0.1f};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ps::testing::LocalPs> ps, ps::testing::LocalPs::Start(2));
  const std::vector<VariableDef> variables = {{"dense/kernel", {3, 2}}, user};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<client::PsClient> client,
                       Connect(*ps, variables, std::vector<float>(6, 0.5f), {0, 6}, sgd, 3));
  const std::vector<int64_t> ids = {7, 1, 499, 20, 3};  // rows on both PS
  std::vector<float> grads(5 * 4, 0.25f), rows(5 * 4);
  const std::vector<client::PsClient::TableRows> push = {
      {"user/embeddings", ids, nullptr, grads.data()}};
  const std::vector<client::PsClient::TableRows> pull = {
      {"user/embeddings", ids, rows.data(), nullptr}};
  ASSERT_OK(client->PushRows(push));  // 0 updates since the start
  ASSERT_OK(client->PushRows(push));  // 1
  ASSERT_OK(client->PushRows(push));  // 2
  ASSERT_OK(client->PullRows(pull));
  ASSERT_OK(client->PushRows(push));            // 0: pulled after the third
  ASSERT_OK(client->PushPullRows(push, pull));  // 1, then pulls after it
  ASSERT_OK(client->PushRows(push));            // 0
  ASSERT_OK_AND_ASSIGN(std::vector<v1::StatsResponse> stats, client->Stats());
  ASSERT_EQ(stats.size(), 2u);
  for (const v1::StatsResponse& s : stats) {
    bool found = false;
    for (const v1::SliceStats& slice : s.slices()) {
      if (slice.key() != "user/embeddings") continue;
      found = true;
      EXPECT_EQ(slice.pushes(), 6);
      ASSERT_GE(slice.staleness_histogram_size(), 4);
      EXPECT_EQ(slice.staleness_histogram(0), 3) << "ps " << s.ps_index();
      EXPECT_EQ(slice.staleness_histogram(1), 2) << "ps " << s.ps_index();
      EXPECT_EQ(slice.staleness_histogram(2), 1) << "ps " << s.ps_index();
      EXPECT_EQ(slice.staleness_histogram(3), 0) << "ps " << s.ps_index();
    }
    EXPECT_TRUE(found) << "ps " << s.ps_index();
  }
}

// Keras's Adam on an Embedding: every row moves at every step with the
// step count shared by the table; lazy Adam moves only a batch's rows.
TEST(LocalTableTest, DenseTableUpdatesMoveEveryHeldRowWithTheTablesStep) {
  VariableDef table{"words/embeddings", {100, 1}};
  table.embedding = true;
  table.initializer = "zeros";
  OptimizerSpec adam{"adam", 0.1f};
  adam.dense_table_updates = true;
  OptimizerSpec lazy_adam{"adam", 0.1f};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalTable> dense, LocalTable::Create(table, 1, &adam));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalTable> lazy, LocalTable::Create(table, 1, &lazy_adam));
  const float g = 0.5f;
  for (LocalTable* t : {dense.get(), lazy.get()}) {
    ASSERT_OK(t->Apply({7}, &g));  // step 1: row 7
    ASSERT_OK(t->Apply({9}, &g));  // step 2: row 9 only
  }
  float d7 = 0, l7 = 0, d9 = 0, l9 = 0;
  ASSERT_OK(dense->Read({7}, &d7));
  ASSERT_OK(lazy->Read({7}, &l7));
  ASSERT_OK(dense->Read({9}, &d9));
  ASSERT_OK(lazy->Read({9}, &l9));
  // TensorFlow's Adam by hand, beta1 0.9, beta2 0.999, epsilon 1e-7.
  auto lr_t = [](int t) {
    return 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
  };
  const double m1 = 0.1 * g, v1 = 0.001 * g * g;
  const double after1 = -lr_t(1) * m1 / (std::sqrt(v1) + 1e-7);
  // Row 7 at step 2: its gradient 0, its slots decayed, step 2's rate.
  const double m2 = 0.9 * m1, v2 = 0.999 * v1;
  EXPECT_NEAR(d7, after1 - lr_t(2) * m2 / (std::sqrt(v2) + 1e-7), 1e-6);
  EXPECT_NEAR(l7, after1, 1e-6);  // lazy: untouched at step 2
  // Row 9's first update: step 2's bias correction (dense), its own first
  // update's (lazy).
  EXPECT_NEAR(d9, -lr_t(2) * m1 / (std::sqrt(v1) + 1e-7), 1e-6);
  EXPECT_NEAR(l9, after1, 1e-6);
  EXPECT_NE(d9, l9);
  // Every row counts the table's steps; a row never named is not held.
  LocalTable::StoredRows rows = dense->Stored();
  EXPECT_EQ(rows.ids.size(), 2u);
  EXPECT_EQ(std::vector<int64_t>(rows.updates.begin(), rows.updates.end()),
            (std::vector<int64_t>{2, 2}));
}

// Keras's Nadam on an Embedding: a row outside the batch keeps its values
// while its m and v decay.
TEST(LocalTableTest, DenseNadamDecaysTheSlotsOfRowsOutsideTheBatch) {
  VariableDef table{"words/embeddings", {100, 1}};
  table.embedding = true;
  table.initializer = "zeros";
  OptimizerSpec nadam{"nadam", 0.1f};
  nadam.dense_table_updates = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalTable> t, LocalTable::Create(table, 1, &nadam));
  const float g = 0.5f;
  ASSERT_OK(t->Apply({7}, &g));
  float after1 = 0;
  ASSERT_OK(t->Read({7}, &after1));
  std::vector<float> before(t->Stored().data.begin(), t->Stored().data.end());
  ASSERT_OK(t->Apply({9}, &g));
  float after2 = 0;
  ASSERT_OK(t->Read({7}, &after2));
  EXPECT_EQ(after2, after1);
  const std::vector<float> now(t->Stored().data.begin(), t->Stored().data.begin() + 3);
  // Row 7 laid out as value, m, v.
  EXPECT_FLOAT_EQ(now[1], before[1] * 0.9f);
  EXPECT_FLOAT_EQ(now[2], before[2] * 0.999f);
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
