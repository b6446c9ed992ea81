// The in-process store moves values and gradients between a replica's flat
// arrays and ShardStores in this process with a PS's rules: pushes apply,
// pulls read back, sync pulls wait for the other replicas, a PS that is
// down or restored under the replica is an error naming it, and after an
// error the queue skips until drained.
#include "client/in_process_store.h"

#include <thread>

#include "client/create_request.h"
#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/ps_control.h"

namespace pstrain::client {
namespace {

using ::testing::HasSubstr;

// Two dense variables (one large enough to be split over 2 PS) and a table.
struct Cluster {
  Placement placement;
  std::vector<int64_t> offsets;
  std::vector<float> initial;
  std::vector<std::shared_ptr<ps::ShardStore>> stores;

  // A replica's (or, with replica -1, an observer's) store.
  std::unique_ptr<InProcessStore> Replica(int replica, const std::string& consistency = "async") {
    InProcessOptions options;
    options.replica = replica;
    options.consistency = *ParseConsistency(consistency);
    options.wait_timeout = absl::Seconds(5);
    auto store = InProcessStore::Create(stores, placement, offsets, options);
    EXPECT_OK(store);
    EXPECT_OK((*store)->WaitUntilReady(absl::Seconds(1)));
    return *std::move(store);
  }
};

Cluster MakeCluster(int num_ps, const std::string& consistency = "async", int replicas = 1,
                    const OptimizerSpec* optimizer = nullptr) {
  Cluster c;
  // A 400 x 400 kernel (640 KB: split in two over 2 PS), a bias and a
  // table.
  const std::vector<VariableDef> variables = {
      {"kernel", {400, 400}}, {"bias", {7}}, {"emb", {100, 3}, true}};
  auto placement = ComputePlacement(variables, num_ps);
  EXPECT_OK(placement);
  c.placement = *placement;
  c.offsets = {0, 400 * 400, 400 * 400 + 7};
  c.initial.resize(400 * 400 + 7);
  for (size_t i = 0; i < c.initial.size(); ++i) c.initial[i] = 0.001f * static_cast<float>(i % 97);
  CreateOptions create;
  create.optimizer.name = "sgd";
  create.optimizer.learning_rate = 0.5f;
  if (optimizer != nullptr) create.optimizer = *optimizer;
  create.consistency = *ParseConsistency(consistency);
  create.num_replicas = replicas;
  create.seed = 3;
  create.generation = 1;
  for (int ps = 0; ps < num_ps; ++ps) {
    c.stores.push_back(std::make_shared<ps::ShardStore>(ps, num_ps));
    ps::PsControl control(c.stores.back().get());
    EXPECT_OK(control.CreateVariables(CreateRequestFor(c.placement, ps, c.initial, c.offsets, create)));
  }
  return c;
}

TEST(InProcessStoreTest, PushPullAppliesTheGradientAndReadsTheNewValuesBack) {
  for (int num_ps : {1, 2}) {
    Cluster c = MakeCluster(num_ps);
    std::unique_ptr<InProcessStore> store = c.Replica(0);
    std::vector<float> params(c.initial.size(), -9), grads(c.initial.size(), 0.25f);
    ASSERT_OK_AND_ASSIGN(int64_t step, store->PullAll(params.data()));
    EXPECT_EQ(step, 0);
    EXPECT_EQ(params, c.initial);
    ASSERT_OK_AND_ASSIGN(step, store->PushPullAll(grads.data(), params.data()));
    EXPECT_EQ(step, 1) << num_ps << " ps";
    for (size_t i = 0; i < params.size(); i += 997) {
      EXPECT_FLOAT_EQ(params[i], c.initial[i] - 0.5f * 0.25f) << i;
    }
    // One variable alone: only its values move.
    std::vector<float> again = params;
    const int bias[] = {1};
    ASSERT_OK(store->PushPullVariables(bias, grads.data(), again.data()).status());
    EXPECT_FLOAT_EQ(again[c.offsets[1]], params[c.offsets[1]] - 0.125f);
    EXPECT_EQ(again[0], params[0]);
  }
}

TEST(InProcessStoreTest, RowsOverSeveralPsAddUpRepeatedIdsAndLandInTheCallersOrder) {
  Cluster c = MakeCluster(2);
  std::unique_ptr<InProcessStore> store = c.Replica(0);
  const std::vector<int64_t> ids = {5, 17, 5, 99, 0};
  std::vector<float> before(ids.size() * 3), after(ids.size() * 3);
  const TableRows pull[] = {{"emb", ids, before.data(), nullptr}};
  ASSERT_OK(store->PullRows(pull));
  EXPECT_EQ(before[0], before[6]);  // id 5 twice
  std::vector<float> grads(ids.size() * 3, 1.0f);
  const TableRows push[] = {{"emb", ids, nullptr, grads.data()}};
  const TableRows pull_after[] = {{"emb", ids, after.data(), nullptr}};
  ASSERT_OK(store->PushPullRows(push, pull_after));
  // lr 0.5: id 5's two gradients add up to 2, the others move by 1.
  EXPECT_FLOAT_EQ(after[0], before[0] - 1.0f);
  EXPECT_FLOAT_EQ(after[3], before[3] - 0.5f);
  EXPECT_FLOAT_EQ(after[9], before[9] - 0.5f);
  EXPECT_FLOAT_EQ(after[12], before[12] - 0.5f);
  const TableRows unknown[] = {{"nope", ids, before.data(), nullptr}};
  EXPECT_THAT(store->PullRows(unknown).message(), HasSubstr("no embedding table \"nope\""));
}

// Dense table updates travel in the create request (as train --local and
// a cluster without ps create their store): a row pushed at step 1 moves
// again at step 2, when only another row is pushed.
TEST(InProcessStoreTest, DenseTableUpdatesReachTheStoreThroughTheCreateRequest) {
  std::vector<float> moved;
  for (bool dense : {false, true}) {
    OptimizerSpec adam{"adam", 0.1f};
    adam.dense_table_updates = dense;
    Cluster c = MakeCluster(1, "async", 1, &adam);
    std::unique_ptr<InProcessStore> store = c.Replica(0);
    std::vector<float> row(3), grads(3, 1.0f);
    const std::vector<int64_t> five = {5}, seventeen = {17};
    const TableRows first[] = {{"emb", five, nullptr, grads.data()}};
    ASSERT_OK(store->PushPullRows(first, {}));
    const TableRows read[] = {{"emb", five, row.data(), nullptr}};
    ASSERT_OK(store->PullRows(read));
    const float after_one = row[0];
    const TableRows second[] = {{"emb", seventeen, nullptr, grads.data()}};
    ASSERT_OK(store->PushPullRows(second, {}));
    ASSERT_OK(store->PullRows(read));
    moved.push_back(row[0] - after_one);
  }
  EXPECT_EQ(moved[0], 0.0f);  // lazy: row 5 untouched at step 2
  EXPECT_LT(moved[1], 0.0f);  // dense: moved on a zero gradient
}

TEST(InProcessStoreTest, ASyncPullWaitsForEveryReplicasPush) {
  Cluster c = MakeCluster(2, "sync", 2);
  std::unique_ptr<InProcessStore> a = c.Replica(0, "sync");
  std::unique_ptr<InProcessStore> b = c.Replica(1, "sync");
  std::vector<float> pa(c.initial.size()), pb(c.initial.size());
  ASSERT_OK(a->PullAll(pa.data()).status());
  ASSERT_OK(b->PullAll(pb.data()).status());
  std::vector<float> ga(c.initial.size(), 1.0f), gb(c.initial.size(), 3.0f);
  absl::StatusOr<int64_t> step_a;
  std::thread first([&] { step_a = a->PushPullAll(ga.data(), pa.data()); });
  // Replica 0 waits on its pull until replica 1 pushes.
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_OK_AND_ASSIGN(int64_t step_b, b->PushPullAll(gb.data(), pb.data()));
  first.join();
  ASSERT_OK(step_a);
  EXPECT_EQ(*step_a, 1);
  EXPECT_EQ(step_b, 1);
  // The average of 1 and 3, at lr 0.5.
  EXPECT_FLOAT_EQ(pa[0], c.initial[0] - 1.0f);
  EXPECT_EQ(pa, pb);
}

TEST(InProcessStoreTest, APsDownOrRestoredUnderTheReplicaFailsNamingIt) {
  Cluster c = MakeCluster(2);
  bool down = false;
  InProcessStore::PsLookup lookup = [&](int ps) -> absl::StatusOr<std::shared_ptr<ps::ShardStore>> {
    if (down && ps == 1) return absl::UnavailableError("stopped");
    return c.stores[ps];
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<InProcessStore> store,
                       InProcessStore::Create(lookup, c.placement, c.offsets, {}));
  ASSERT_OK(store->WaitUntilReady(absl::Seconds(1)));
  EXPECT_EQ(store->generation(), 1);
  std::vector<float> params(c.initial.size()), grads(c.initial.size(), 0.0f);
  down = true;
  absl::Status s = store->PushPullAll(grads.data(), params.data()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("ps:1 (in process): stopped"));
  // The queue skips what follows until drained.
  down = false;
  EXPECT_EQ(store->PullAll(params.data()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->Drain().code(), absl::StatusCode::kUnavailable);
  ASSERT_OK(store->PullAll(params.data()).status());

  // Restored to generation 2 under the replica: Aborted until it waits for
  // the PS again, and then it serves the new generation.
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents shard, c.stores[0]->Snapshot(0));
  ASSERT_OK(c.stores[0]->Restore(shard, 2));
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents shard1, c.stores[1]->Snapshot(0));
  ASSERT_OK(c.stores[1]->Restore(shard1, 2));
  s = store->PushPullAll(grads.data(), params.data()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(store->Drain().code(), absl::StatusCode::kAborted);
  ASSERT_OK(store->WaitUntilReady(absl::Seconds(1)));
  EXPECT_EQ(store->generation(), 2);
  ASSERT_OK(store->PushPullAll(grads.data(), params.data()).status());
}

TEST(InProcessStoreTest, ANonFiniteGradientIsRefusedAndNothingMoves) {
  Cluster c = MakeCluster(1);
  std::unique_ptr<InProcessStore> store = c.Replica(0);
  std::vector<float> params(c.initial.size()), grads(c.initial.size(), 0.0f);
  grads[12345] = std::numeric_limits<float>::quiet_NaN();
  absl::Status s = store->PushAll(grads.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel"));
  EXPECT_EQ(store->Drain().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store->PullAll(params.data()).status());
  EXPECT_EQ(params, c.initial);
}

TEST(InProcessStoreTest, ReplicaPushesCountsEachReplicasAppliedPushes) {
  Cluster c = MakeCluster(2, "async", 2);
  std::unique_ptr<InProcessStore> a = c.Replica(0);
  std::unique_ptr<InProcessStore> b = c.Replica(1);
  std::vector<float> grads(c.initial.size(), 0.0f);
  for (int i = 0; i < 3; ++i) ASSERT_OK(a->PushAll(grads.data()));
  ASSERT_OK(b->PushAll(grads.data()));
  EXPECT_THAT(a->ReplicaPushes(0), ::testing::Eq(absl::StatusOr<int64_t>(3)));
  EXPECT_THAT(a->ReplicaPushes(1), ::testing::Eq(absl::StatusOr<int64_t>(1)));
  EXPECT_EQ(a->ReplicaPushes(2).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain::client
