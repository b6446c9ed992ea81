// The collective store over a real ring on loopback, each replica in a
// thread of its own with its own ShardStore: every replica applies the
// mean of the replicas' gradients (dense and table rows) and they hold the
// same bits; dense exchanges are packed by --bytes_per_pack and nothing
// else; a Start returns before its all-reduce has ended (what lets the
// step loop differentiate the earlier layers meanwhile); a neighbour that
// goes away fails the exchange, naming it, and what follows is skipped.
#include "client/collective_store.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/status_testing.h"
#include "client/create_request.h"
#include "client/in_process_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/ps_control.h"
#include "transport/testing/loopback_ring.h"

namespace pstrain::client {
namespace {

using ::testing::HasSubstr;

// A two-layer model's variables, as the step loop lays them out: layer 0
// (variables 0 and 1) and layer 1 (2 and 3), and a table.
const std::vector<VariableDef>& Variables() {
  static const auto* v = new std::vector<VariableDef>{{"dense_0/kernel", {64, 64}},
                                                      {"dense_0/bias", {64}},
                                                      {"dense_1/kernel", {64, 10}},
                                                      {"dense_1/bias", {10}},
                                                      {"emb", {20, 3}, true}};
  return *v;
}
const std::vector<int64_t> kOffsets = {0, 4096, 4160, 4800, 4810};  // the table: none
constexpr int64_t kFloats = 4810;
constexpr int64_t kLayer1Bytes = (640 + 10) * sizeof(float);

float Initial(int64_t i) { return 0.01f * static_cast<float>(i % 31); }

// One replica: its own store of the model (SGD at 0.5) wrapped in a
// collective store over its ring.
struct Replica {
  std::shared_ptr<ps::ShardStore> shard;
  std::unique_ptr<CollectiveStore> store;
};

Replica MakeReplica(Ring* ring, int64_t bytes_per_pack) {
  Replica r;
  auto placement = ComputePlacement(Variables(), 1);
  EXPECT_OK(placement);
  std::vector<float> initial(kFloats);
  for (int64_t i = 0; i < kFloats; ++i) initial[i] = Initial(i);
  CreateOptions create;
  create.optimizer.name = "sgd";
  create.optimizer.learning_rate = 0.5f;
  create.consistency = Consistency::Async();
  create.seed = 3;
  create.generation = 1;
  r.shard = std::make_shared<ps::ShardStore>(0, 1);
  ps::PsControl control(r.shard.get());
  EXPECT_OK(control.CreateVariables(CreateRequestFor(*placement, 0, initial, kOffsets, create)));
  auto local = InProcessStore::Create({r.shard}, *placement, kOffsets, InProcessOptions());
  EXPECT_OK(local);
  CollectiveOptions options;
  options.bytes_per_pack = bytes_per_pack;
  r.store =
      std::make_unique<CollectiveStore>(*std::move(local), ring, *placement, kOffsets, options);
  EXPECT_OK(r.store->WaitUntilReady(absl::Seconds(1)));
  return r;
}

// Runs `body(rank, ring)` on `n` members of a ring formed on loopback, each
// in its own thread, a neighbour silent for `timeout` failing a collective.
void OnRing(int n, const std::function<void(int rank, Ring* ring)>& body,
            absl::Duration timeout = absl::Seconds(10)) {
  testing::OnLoopbackRing(
      n, [&](RingOptions& o) { o.timeout = timeout; },
      [&](int rank, Ring& ring) { body(rank, &ring); });
}

// Replica r's gradient of element i.
float Grad(int r, int64_t i) {
  return static_cast<float>(r + 1) * 0.25f * static_cast<float>(i % 7);
}

// One step as the step loop takes it with push_per_layer: layer 1's
// exchange, then layer 0's, then the wait.
absl::StatusOr<int64_t> Step(CollectiveStore* store, const std::vector<float>& grads,
                             std::vector<float>* params) {
  store->StartDense({2, 3}, grads.data(), params->data(), ParameterStore::Queue::kDense);
  const ParameterStore::Ticket last =
      store->StartDense({0, 1}, grads.data(), params->data(), ParameterStore::Queue::kDense);
  return store->Wait(last);
}

TEST(CollectiveStoreTest, EveryReplicaAppliesTheMeanGradientWhateverThePacks) {
  // bytes_per_pack: 0 sends each exchange alone; below layer 1's size, the
  // same; above it, layer 1 waits for layer 0 (variable 0 ends a pack).
  const struct {
    int64_t bytes_per_pack;
    int64_t all_reduces_per_step;
  } kCases[] = {{0, 2}, {kLayer1Bytes, 2}, {kLayer1Bytes + 4, 1}, {1 << 20, 1}};
  for (const auto& c : kCases) {
    const int n = 3;
    std::vector<std::vector<float>> held(n);
    std::vector<int64_t> all_reduces(n);
    OnRing(n, [&](int rank, Ring* ring) {
      Replica replica = MakeReplica(ring, c.bytes_per_pack);
      std::vector<float> grads(kFloats), params(kFloats);
      for (int64_t i = 0; i < kFloats; ++i) grads[i] = Grad(rank, i);
      for (int step = 0; step < 2; ++step) EXPECT_OK(Step(replica.store.get(), grads, &params));
      EXPECT_OK(replica.store->Drain());
      all_reduces[rank] = replica.store->dense_all_reduces();
      held[rank] = params;
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all_reduces[r], 2 * c.all_reduces_per_step) << c.bytes_per_pack;
      EXPECT_EQ(held[r], held[0]) << "replica " << r << " holds other bits";
    }
    // Two SGD steps at 0.5 on the mean of 1x, 2x and 3x the pattern (2x).
    for (int64_t i = 0; i < kFloats; i += 13) {
      EXPECT_NEAR(held[0][i], Initial(i) - 2 * 0.5f * Grad(1, i), 1e-5) << i;
    }
  }
}

TEST(CollectiveStoreTest, AStartReturnsBeforeItsAllReduceEnds) {
  // Replica 1 joins the step 400 ms late. Replica 0's layers are handed to
  // the store's thread at once (its step loop goes on differentiating);
  // only its Wait waits.
  std::atomic<bool> late_started{false};
  std::vector<float> held[2];
  absl::Duration starts, waited;
  OnRing(2, [&](int rank, Ring* ring) {
    Replica replica = MakeReplica(ring, 0);
    std::vector<float> grads(kFloats), params(kFloats);
    for (int64_t i = 0; i < kFloats; ++i) grads[i] = Grad(rank, i);
    CollectiveStore* store = replica.store.get();
    if (rank == 1) {
      absl::SleepFor(absl::Milliseconds(400));
      late_started = true;
      EXPECT_OK(Step(store, grads, &params));
    } else {
      const absl::Time t0 = absl::Now();
      store->StartDense({2, 3}, grads.data(), params.data(), ParameterStore::Queue::kDense);
      const ParameterStore::Ticket last =
          store->StartDense({0, 1}, grads.data(), params.data(), ParameterStore::Queue::kDense);
      starts = absl::Now() - t0;
      EXPECT_FALSE(late_started) << "the starts waited for the other replica";
      const absl::Time t1 = absl::Now();
      EXPECT_OK(store->Wait(last));
      waited = absl::Now() - t1;
    }
    EXPECT_OK(store->Drain());
    held[rank] = params;
  });
  EXPECT_LT(starts, absl::Milliseconds(300));
  EXPECT_GT(waited, absl::Milliseconds(100));
  EXPECT_EQ(held[0], held[1]);
  EXPECT_NEAR(held[0][4000], Initial(4000) - 0.5f * 1.5f * Grad(0, 4000), 1e-6);
}

TEST(CollectiveStoreTest, TableRowsFollowTheDensePackInTheOrderStarted) {
  // Each replica pushes rows of ids {rank, 5} after its dense step; every
  // replica applies both replicas' rows, each scaled by 1/2, then pulls.
  const std::vector<int64_t> pulled_ids = {0, 1, 5, 6};
  std::vector<float> before[2], after[2];
  OnRing(2, [&](int rank, Ring* ring) {
    Replica replica = MakeReplica(ring, 1 << 20);
    CollectiveStore* store = replica.store.get();
    before[rank].assign(12, -1);
    after[rank].assign(12, -1);
    TableRows initial{"emb", pulled_ids, before[rank].data()};
    store->StartRows({}, {initial}, ParameterStore::Queue::kRows);
    std::vector<float> grads(kFloats, 1.0f), params(kFloats);
    store->StartDense({2, 3}, grads.data(), params.data(), ParameterStore::Queue::kDense);
    store->StartDense({0, 1}, grads.data(), params.data(), ParameterStore::Queue::kDense);
    const std::vector<int64_t> ids = {rank, 5};
    const std::vector<float> row_grads = {1, 1, 1, 2, 2, 2};
    TableRows push{"emb", ids, nullptr, row_grads.data(), true};
    store->StartRows({push}, {}, ParameterStore::Queue::kRows);
    TableRows pull{"emb", pulled_ids, after[rank].data()};
    const ParameterStore::Ticket t = store->StartRows({}, {pull}, ParameterStore::Queue::kRows);
    EXPECT_OK(store->Wait(t));
    EXPECT_OK(store->Drain());
    EXPECT_EQ(store->dense_all_reduces(), 1);
  });
  ASSERT_EQ(after[0], after[1]);
  // Ids 0 and 1: one replica's row of 1s, halved, times 0.5; id 5: both
  // replicas' 2s, halved, times 0.5; id 6 as it was.
  const float moved[4] = {-0.25f, -0.25f, -1.0f, 0.0f};
  for (int row = 0; row < 4; ++row) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_FLOAT_EQ(after[0][row * 3 + k] - before[0][row * 3 + k], moved[row])
          << "id " << pulled_ids[row] << ", element " << k;
    }
  }
}

TEST(CollectiveStoreTest, ANeighbourThatGoesAwayFailsTheExchangeAndWhatFollowsIsSkipped) {
  absl::Status first, second, drained, after;
  OnRing(
      2,
      [&](int rank, Ring* ring) {
        Replica replica = MakeReplica(ring, 0);
        std::vector<float> grads(kFloats, 1.0f), params(kFloats);
        if (rank == 1) {
          ring->Shutdown();  // gone before the step
          return;
        }
        first = Step(replica.store.get(), grads, &params).status();
        second = Step(replica.store.get(), grads, &params).status();
        drained = replica.store->Drain();
        // Drained: the queues start clean (the ring itself stays unusable).
        after = replica.store->Wait(ParameterStore::Ticket()).status();
      },
      absl::Seconds(3));
  EXPECT_FALSE(first.ok());
  EXPECT_THAT(first.message(), HasSubstr("worker:1"));
  EXPECT_EQ(second, first);
  EXPECT_EQ(drained, first);
  EXPECT_OK(after);
}

}  // namespace
}  // namespace pstrain::client
