#include "store/shard_store.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

SliceDef Slice(const std::string& var, int64_t rows, int64_t cols, int ps = 0) {
  SliceDef d;
  d.variable = var;
  d.row_end = rows;
  d.row_elements = cols;
  d.ps = ps;
  return d;
}

ShardStore::DenseInit Dense(const SliceDef& def, const std::string& value,
                            const std::string& consistency = "") {
  ShardStore::DenseInit d;
  d.def = def;
  d.has_value = true;
  d.value = value;
  d.consistency = consistency;
  return d;
}

ShardStore::JobConfig Job(OptimizerSpec opt, const std::string& mode = "async", int replicas = 1,
                          int aggregate = 0) {
  ShardStore::JobConfig job;
  job.optimizer = opt;
  job.consistency = *ParseConsistency(mode);
  job.num_replicas = replicas;
  job.replicas_to_aggregate = aggregate;
  return job;
}

struct Grad {
  std::string key;
  std::vector<float> values;
  std::vector<int64_t> ids;
  int64_t version = 0;
};

// One push of gradients received in one piece.
absl::StatusOr<std::vector<bool>> Push(ShardStore& store, const std::vector<Grad>& grads,
                                       int replica = 0, const std::string& mode = "",
                                       int64_t generation = 0) {
  std::string payload;
  ShardStore::PushBatch batch;
  batch.replica = replica;
  batch.generation = generation;
  batch.consistency = mode;
  for (const Grad& g : grads) payload += Bytes(g.values);
  Payload received;
  received.Append(payload.data(), static_cast<int64_t>(payload.size()));
  for (const Grad& g : grads) {
    batch.tensors.push_back({g.key, g.ids, g.version, -1});
  }
  return store.Push(batch, received);
}

// Pulls one tensor; nullopt-like empty vector plus `ready` false when it must wait.
absl::StatusOr<std::vector<float>> Pull(ShardStore& store, const std::string& key,
                                        std::vector<int64_t> ids = {}, int replica = 0,
                                        bool* ready = nullptr, int64_t* version = nullptr,
                                        int64_t generation = 0) {
  ShardStore::PullBatch b;
  b.replica = replica;
  b.generation = generation;
  b.tensors.push_back({key, ids});
  auto size = store.PullSize(b);
  if (!size.ok()) return size.status();
  std::vector<float> out(*size / 4);
  std::vector<ShardStore::Pulled> pulled;
  std::string why;
  auto ok = store.TryPull(b, reinterpret_cast<char*>(out.data()), &pulled, &why);
  if (!ok.ok()) return ok.status();
  if (ready != nullptr) *ready = *ok;
  if (!*ok) return std::vector<float>{};
  if (version != nullptr) *version = pulled[0].version;
  return out;
}

class ShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        bool created,
        store_.Initialize(Job({"sgd", 0.5f}),
                          {Dense(Slice("w", 3, 2), w_), Dense(Slice("b", 2, 1), b_)}, {}));
    EXPECT_TRUE(created);
  }
  std::string w_ = Bytes({1, 2, 3, 4, 5, 6});
  std::string b_ = Bytes({0.5f, -0.5f});
  ShardStore store_{0, 1};
};

TEST_F(ShardStoreTest, PullReturnsInitialValues) {
  ASSERT_OK_AND_ASSIGN(auto w, Pull(store_, "w/part_0"));
  EXPECT_EQ(w, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(ShardStoreTest, PushAppliesSgdAndCountsVersions) {
  ASSERT_OK(Push(store_, {{"w/part_0", {2, 2, 2, 2, 2, 2}}, {"b/part_0", {1, 1}}}).status());
  int64_t version = -1;
  ASSERT_OK_AND_ASSIGN(auto w, Pull(store_, "w/part_0", {}, 0, nullptr, &version));
  EXPECT_EQ(w, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(version, 1);
  ASSERT_OK_AND_ASSIGN(auto b, Pull(store_, "b/part_0"));
  EXPECT_EQ(b, (std::vector<float>{0, -1}));
  EXPECT_EQ(store_.global_step(), 1);
  auto stats = store_.Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].key, "w/part_0");
  EXPECT_EQ(stats[0].bytes, 24);
  EXPECT_EQ(stats[0].pushes, 1);
  EXPECT_EQ(stats[0].pulls, 1);
  EXPECT_EQ(stats[0].consistency, "async");
  EXPECT_EQ(stats[0].staleness[0], 1);
}

// A writable payload holding `bytes` cut into pieces of `chunk` bytes, as a
// socket read leaves a message; the pieces live in *this.
struct Received {
  Received(const std::string& bytes, size_t chunk) {
    for (size_t i = 0; i < bytes.size(); i += chunk) pieces.push_back(bytes.substr(i, chunk));
    for (const std::string& p : pieces) payload.Append(p.data(), static_cast<int64_t>(p.size()));
    payload.set_writable(true);
  }
  std::string Bytes() const {
    std::string out(payload.size(), '?');
    payload.Copy(0, payload.size(), out.data());
    return out;
  }
  std::vector<std::string> pieces;
  Payload payload;
};

std::string Joined(const std::vector<HeldBytes>& held) {
  std::string out;
  for (const HeldBytes& h : held) out.append(h.data, h.size);
  return out;
}

// A push-then-pull answered in place with SGD: the answer is the stored
// values themselves and the gradient's bytes end up holding the previous
// values.
TEST_F(ShardStoreTest, PushThenPullWithSgdAnswersFromTheStoredValues) {
  // w's floats straddle the received pieces (chunks of 7 bytes).
  Received frame(Bytes({2, -2, 4, 1, 0.5f, 6}) + Bytes({1, 3}), 7);
  ShardStore::PushBatch batch;
  batch.tensors = {{"w/part_0", {}, 0, -1}, {"b/part_0", {}, 0, -1}};
  ASSERT_TRUE(store_.CanReadBack(batch, {{"w/part_0"}, {"b/part_0"}}));
  std::vector<ShardStore::Pulled> pulled;
  ShardStore::PushBatch::InPlaceAnswer answer;
  batch.read_back_in_payload = &frame.payload;
  batch.read_back_in_place = &answer;
  batch.read_back_versions = &pulled;
  ASSERT_OK(store_.Push(batch, frame.payload).status());
  // lr 0.5: w = {1..6} - 0.5 g, b = {0.5, -0.5} - 0.5 g.
  const std::vector<float> w = {0, 3, 1, 3.5f, 4.75f, 3}, b = {0, -2};
  EXPECT_FALSE(answer.in_payload);
  ASSERT_EQ(answer.held.size(), 2u);
  EXPECT_EQ(Joined(answer.held), Bytes(w) + Bytes(b));
  EXPECT_EQ(frame.Bytes(), w_ + b_);
  ASSERT_EQ(pulled.size(), 2u);
  EXPECT_EQ(pulled[0].version, 1);
  EXPECT_EQ(pulled[0].bytes, 24);
  EXPECT_EQ(pulled[1].version, 1);
  EXPECT_EQ(pulled[1].bytes, 8);
  ASSERT_OK_AND_ASSIGN(auto stored_w, Pull(store_, "w/part_0"));
  EXPECT_EQ(stored_w, w);
  ASSERT_OK_AND_ASSIGN(auto stored_b, Pull(store_, "b/part_0"));
  EXPECT_EQ(stored_b, b);
  answer.held.clear();

  // A non-finite gradient in the second tensor, after the first was
  // applied: refused, and both keep their values.
  Received bad_frame(Bytes({1, 1, 1, 1, 1, 1}) + Bytes({1, NAN}), 5);
  batch.read_back_in_payload = &bad_frame.payload;
  pulled.clear();
  auto refused = store_.Push(batch, bad_frame.payload);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "gradient for b/part_0 has a non-finite value (nan) at element 1");
  EXPECT_TRUE(answer.held.empty());
  ASSERT_OK_AND_ASSIGN(stored_w, Pull(store_, "w/part_0"));
  EXPECT_EQ(stored_w, w);
  ASSERT_OK_AND_ASSIGN(stored_b, Pull(store_, "b/part_0"));
  EXPECT_EQ(stored_b, b);
  const auto stats = store_.Stats();
  EXPECT_EQ(stats[0].version, 1);
  EXPECT_EQ(stats[0].pushes, 1);
  // Another payload than the one pushed, one that may not be written, or
  // nowhere to put the answer is a caller's bug, refused.
  batch.read_back_in_payload = &frame.payload;
  EXPECT_EQ(store_.Push(batch, bad_frame.payload).status().code(), absl::StatusCode::kInternal);
  Received read_only(Bytes({1, 1, 1, 1, 1, 1}) + Bytes({1, 1}), 8);
  read_only.payload.set_writable(false);
  batch.read_back_in_payload = &read_only.payload;
  EXPECT_EQ(store_.Push(batch, read_only.payload).status().code(), absl::StatusCode::kInternal);
  batch.read_back_in_payload = &bad_frame.payload;
  batch.read_back_in_place = nullptr;
  EXPECT_EQ(store_.Push(batch, bad_frame.payload).status().code(), absl::StatusCode::kInternal);
}

// While an answer's values are held (still being sent), the next write
// leaves them as they were and the tensor goes on in a copy; once they are
// released, writes happen in place again.
TEST_F(ShardStoreTest, HeldAnswersKeepTheirValuesWhileTheTensorMovesOn) {
  auto push_pull = [&](float g, std::vector<HeldBytes>* held) {
    Received frame(Bytes({g, g}), 8);
    ShardStore::PushBatch batch;
    batch.tensors = {{"b/part_0", {}, 0, -1}};
    ShardStore::PushBatch::InPlaceAnswer answer;
    batch.read_back_in_payload = &frame.payload;
    batch.read_back_in_place = &answer;
    absl::Status s = store_.Push(batch, frame.payload).status();
    *held = std::move(answer.held);
    return s;
  };
  std::vector<HeldBytes> first, second, third;
  ASSERT_OK(push_pull(1, &first));   // b = {0, -1}
  ASSERT_OK(push_pull(2, &second));  // b = {-1, -2}, while `first` is held
  EXPECT_EQ(Joined(first), Bytes({0, -1}));
  EXPECT_EQ(Joined(second), Bytes({-1, -2}));
  EXPECT_NE(first[0].data, second[0].data);
  // A plain push (no answer) also moves on from held values.
  ASSERT_OK(Push(store_, {{"b/part_0", {2, 2}}}).status());  // b = {-2, -3}
  EXPECT_EQ(Joined(second), Bytes({-1, -2}));
  ASSERT_OK_AND_ASSIGN(auto b, Pull(store_, "b/part_0"));
  EXPECT_EQ(b, (std::vector<float>{-2, -3}));
  first.clear();
  second.clear();
  ASSERT_OK(push_pull(2, &third));  // b = {-3, -4}
  const char* at = third[0].data;
  third.clear();
  ASSERT_OK(push_pull(2, &third));  // b = {-4, -5}, in place
  EXPECT_EQ(third[0].data, at);
  EXPECT_EQ(Joined(third), Bytes({-4, -5}));
}

// A tensor large enough to be applied in shares on several cores: the
// earliest bad element of all is reported, and every share is undone.
TEST(ShardStoreExchangeTest, ABadValueInAnyShareUndoesEveryShare) {
  constexpr int64_t kN = int64_t{1} << 20;
  std::vector<float> init(kN);
  for (int64_t i = 0; i < kN; ++i) init[i] = 0.25f * static_cast<float>(i % 1000);
  const std::string init_bytes = Bytes(init);
  ShardStore store(0, 1);
  ASSERT_OK(
      store.Initialize(Job({"sgd", 1}), {Dense(Slice("big", kN, 1), init_bytes)}, {}).status());
  ShardStore::PushBatch batch;
  batch.tensors = {{"big/part_0", {}, 0, -1}};
  std::vector<float> grad(kN, 1.0f);
  grad[900001] = NAN;
  grad[300007] = -std::numeric_limits<float>::infinity();
  Received frame(Bytes(grad), 65536 + 3);
  ShardStore::PushBatch::InPlaceAnswer answer;
  batch.read_back_in_payload = &frame.payload;
  batch.read_back_in_place = &answer;
  auto refused = store.Push(batch, frame.payload);
  EXPECT_EQ(refused.status().message(),
            "gradient for big/part_0 has a non-finite value (-inf) at element 300007");
  ASSERT_OK_AND_ASSIGN(auto values, Pull(store, "big/part_0"));
  EXPECT_TRUE(values == init);

  grad[900001] = grad[300007] = 1.0f;
  Received good(Bytes(grad), 65536 + 3);
  batch.read_back_in_payload = &good.payload;
  ASSERT_OK(store.Push(batch, good.payload).status());
  std::vector<float> expected = init;
  for (float& v : expected) v -= 1.0f;
  const std::string sent = Joined(answer.held);
  ASSERT_EQ(sent.size(), init_bytes.size());
  EXPECT_TRUE(sent == Bytes(expected));
}

// Optimizers with slots answer from the frame: the new values overwrite the
// gradient where it was received and go back from there.
TEST(ShardStoreRewriteTest, PushThenPullWithMomentumWritesTheNewValuesOverTheGradient) {
  ShardStore store(0, 1);
  OptimizerSpec momentum{"momentum", 0.5f};
  momentum.momentum = 0.5f;
  ASSERT_OK(
      store.Initialize(Job(momentum), {Dense(Slice("w", 3, 2), Bytes({1, 2, 3, 4, 5, 6}))}, {})
          .status());
  Received frame(Bytes({2, -2, 4, 1, 0.5f, 6}), 7);
  ShardStore::PushBatch batch;
  batch.tensors = {{"w/part_0", {}, 0, -1}};
  ShardStore::PushBatch::InPlaceAnswer answer;
  batch.read_back_in_payload = &frame.payload;
  batch.read_back_in_place = &answer;
  ASSERT_OK(store.Push(batch, frame.payload).status());
  // First step: accum = g, w -= 0.5 g.
  const std::vector<float> w = {0, 3, 1, 3.5f, 4.75f, 3};
  EXPECT_TRUE(answer.in_payload);
  EXPECT_TRUE(answer.held.empty());
  EXPECT_EQ(frame.Bytes(), Bytes(w));
  ASSERT_OK_AND_ASSIGN(auto stored, Pull(store, "w/part_0"));
  EXPECT_EQ(stored, w);

  Received bad_frame(Bytes({1, 1, INFINITY, 1, 1, 1}), 7);
  batch.read_back_in_payload = &bad_frame.payload;
  answer = {};
  EXPECT_EQ(store.Push(batch, bad_frame.payload).status().message(),
            "gradient for w/part_0 has a non-finite value (inf) at element 2");
  ASSERT_OK_AND_ASSIGN(stored, Pull(store, "w/part_0"));
  EXPECT_EQ(stored, w);
}

TEST_F(ShardStoreTest, StalenessIsCountedInBuckets) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(Push(store_, {{"b/part_0", {0, 0}, {}, 0}}).status());  // computed at version 0
  }
  const auto stats = store_.Stats();
  // Staleness 0, 1, 2, 3, 4: buckets 0, 1, 2, 3 (3-4) twice.
  EXPECT_EQ(stats[1].staleness[0], 1);
  EXPECT_EQ(stats[1].staleness[1], 1);
  EXPECT_EQ(stats[1].staleness[2], 1);
  EXPECT_EQ(stats[1].staleness[3], 2);
}

TEST_F(ShardStoreTest, SecondInitializeKeepsValues) {
  const std::string nines = Bytes({9, 9, 9, 9, 9, 9});
  ASSERT_OK_AND_ASSIGN(bool created,
                       store_.Initialize(Job({"sgd", 1}), {Dense(Slice("w", 3, 2), nines)}, {}));
  EXPECT_FALSE(created);
  ASSERT_OK_AND_ASSIGN(auto w, Pull(store_, "w/part_0"));
  EXPECT_EQ(w[0], 1);
}

TEST_F(ShardStoreTest, BadPushesChangeNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  auto r = Push(store_, {{"w/part_0", {1, 1, 1, 1, 1, 1}}, {"b/part_0", {1}}});
  EXPECT_EQ(r.status().message(), "push payload has 28 bytes but its tensors need 32");
  r = Push(store_, {{"b/part_0", {inf, 1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "gradient for b/part_0 has a non-finite value (inf) at element 0");
  r = Push(store_, {{"w/part_0", {1, std::nanf(""), 1, 1, 1, 1}}});
  EXPECT_EQ(r.status().message(),
            "gradient for w/part_0 has a non-finite value (nan) at element 1");
  r = Push(store_, {{"nope/part_0", {1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "ps:0 holds no tensor \"nope/part_0\"");
  r = Push(store_, {{"w/part_0", {1, 1, 1, 1, 1, 1}}, {"w/part_0", {1, 1, 1, 1, 1, 1}}});
  EXPECT_EQ(r.status().message(), "push names w/part_0 twice");
  r = Push(store_, {{"b/part_0", {1, 1}}}, /*replica=*/1);
  EXPECT_EQ(r.status().message(), "replica 1 is out of range: the job has 1 replicas");
  r = Push(store_, {{"b/part_0", {1, 1}}}, 0, "sync");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "push is for a sync job but this job runs async");
  r = Push(store_, {{"b/part_0", {1, 1}, {3}}});
  EXPECT_EQ(r.status().message(), "b/part_0 is dense but the request names 1 ids");

  ASSERT_OK_AND_ASSIGN(auto w, Pull(store_, "w/part_0"));
  EXPECT_EQ(w, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_OK_AND_ASSIGN(auto b, Pull(store_, "b/part_0"));
  EXPECT_EQ(b, (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(store_.global_step(), 0);
}

TEST(ShardStoreInitTest, RejectsBadDefinitionsAndStoresNothing) {
  ShardStore store(1, 2);
  const std::string one = Bytes({1});
  auto r = store.Initialize(Job({"sgd", 1}), {Dense(Slice("w", 1, 1, 0), one)}, {});
  EXPECT_EQ(r.status().message(), "slice w/part_0 is placed on ps:0, not on this ps:1");
  r = store.Initialize(Job({"sgd", 1}), {Dense(Slice("w", 2, 1, 1), one)}, {});
  EXPECT_EQ(r.status().message(), "initial value for w/part_0 has 4 bytes, expected 8");
  r = store.Initialize(Job({"adamw", 1}), {Dense(Slice("w", 1, 1, 1), one)}, {});
  EXPECT_EQ(r.status().message(),
            "unknown optimizer \"adamw\" (known: sgd, momentum, adagrad, adam, nadam, ftrl)");
  r = store.Initialize(Job({"sgd", 1}), {Dense(Slice("w", 1, 1, 1), one, "ssp:-2")}, {});
  EXPECT_EQ(r.status().message(),
            "w/part_0: consistency \"ssp:-2\" is not one of async, sync, ssp:S (S an integer "
            "from 0 to 1000000)");
  r = store.Initialize(Job({"sgd", 1}, "sync", 2, 3), {Dense(Slice("w", 1, 1, 1), one)}, {});
  EXPECT_EQ(r.status().message(),
            "replicas_to_aggregate is 3; it must be from 1 to num_replicas (2), or 0 for all");
  r = store.Initialize(Job({"sgd", 1}), {}, {{"emb", 0, 4, "", ""}});
  EXPECT_EQ(r.status().message(),
            "embedding table \"emb\" has vocabulary 0 and dim 4; both must be positive (dim at "
            "most 1048576)");
  ShardStore::DenseInit no_value;
  no_value.def = Slice("w", 1, 1, 1);
  r = store.Initialize(Job({"sgd", 1}), {no_value}, {});
  EXPECT_EQ(r.status().message(), "slice w/part_0 has neither an initial value nor an initializer");
  EXPECT_FALSE(store.initialized());
  auto pulled = Pull(store, "w/part_0");
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreInitTest, InitializerFillsLargeSlicesOnThePs) {
  ShardStore store(0, 1);
  ShardStore::DenseInit d;
  d.def = Slice("big", 1000, 100);
  d.initializer = "uniform:0.1";
  ASSERT_OK(store.Initialize(Job({"adam", 0.1f}), {d}, {}).status());
  ASSERT_OK_AND_ASSIGN(auto v, Pull(store, "big/part_0"));
  ASSERT_EQ(v.size(), 100000u);
  float lo = 1, hi = -1;
  for (float x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GE(lo, -0.1f);
  EXPECT_LE(hi, 0.1f);
  EXPECT_LT(lo, -0.09f);
  EXPECT_GT(hi, 0.09f);
}

TEST(ShardStoreConcurrencyTest, AsyncPushesLoseNoUpdate) {
  ShardStore store(0, 1);
  const std::string zeros = Bytes({0, 0, 0, 0});
  ASSERT_OK(
      store.Initialize(Job({"sgd", 1}, "async", 4), {Dense(Slice("v", 4, 1), zeros)}, {}).status());
  constexpr int kThreads = 4, kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_OK(Push(store, {{"v/part_0", {1, 1, 1, 1}}}, t).status());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_OK_AND_ASSIGN(auto v, Pull(store, "v/part_0"));
  EXPECT_EQ(v, std::vector<float>(4, -kThreads * kPushes));
  EXPECT_EQ(store.global_step(), kThreads * kPushes);
}

// Pushes and pulls of a dense slice and a table from several threads while
// another reads statistics and takes snapshots: the ThreadSanitizer run's
// main target, and every update still lands.
TEST(ShardStoreConcurrencyTest, MixedTrafficWithStatsAndSnapshotsLosesNothing) {
  ShardStore store(0, 1);
  ASSERT_OK(store
                .Initialize(Job({"sgd", 1}, "async", 4),
                            {Dense(Slice("v", 4, 1), Bytes({0, 0, 0, 0}))},
                            {{"emb", 1000, 2, "", "zeros"}})
                .status());
  constexpr int kThreads = 4, kPushes = 200;
  std::atomic<bool> done{false};
  std::thread observer([&] {
    while (!done.load()) {
      EXPECT_EQ(store.Stats().size(), 2u);
      EXPECT_OK(store.Snapshot(store.global_step()).status());
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        ASSERT_OK(
            Push(store, {{"v/part_0", {1, 1, 1, 1}}, {"emb", {1, 1, 1, 1}, {t, 500}}}, t).status());
        ASSERT_OK(Pull(store, "emb", {t, 500, 999}).status());
      }
    });
  }
  for (auto& t : threads) t.join();
  done.store(true);
  observer.join();
  ASSERT_OK_AND_ASSIGN(auto v, Pull(store, "v/part_0"));
  EXPECT_EQ(v, std::vector<float>(4, -kThreads * kPushes));
  ASSERT_OK_AND_ASSIGN(auto rows, Pull(store, "emb", {0, 1, 2, 3, 500, 999}));
  std::vector<float> want(12, -kPushes);
  want[8] = want[9] = -kThreads * kPushes;  // every thread pushed row 500
  want[10] = want[11] = 0;                  // row 999 was only pulled
  EXPECT_EQ(rows, want);
  EXPECT_EQ(store.Stats()[1].rows, 5);
}

TEST(ShardStoreSlotsTest, AdamSlotsPersistAcrossPushesPerSlice) {
  ShardStore store(0, 1);
  OptimizerSpec adam;
  adam.name = "adam";
  adam.learning_rate = 0.1f;
  adam.beta1 = 0.5f;
  adam.beta2 = 0.75f;
  const std::string zero = Bytes({0});
  ASSERT_OK(
      store
          .Initialize(Job(adam), {Dense(Slice("a", 1, 1), zero), Dense(Slice("b", 1, 1), zero)}, {})
          .status());
  ASSERT_OK(Push(store, {{"a/part_0", {1}}, {"b/part_0", {1}}}).status());
  ASSERT_OK(Push(store, {{"a/part_0", {-2}}}).status());
  ASSERT_OK_AND_ASSIGN(auto a, Pull(store, "a/part_0"));
  // The same two steps as OptimizerTest.AdamFirstStepsByHand.
  const double lr2 = 0.1 * std::sqrt(0.4375) / 0.75;
  EXPECT_NEAR(a[0], -0.1 - lr2 * (-0.75) / (std::sqrt(1.1875) + 1e-7), 1e-6);
  // b had one update only: its own t is 1.
  ASSERT_OK_AND_ASSIGN(auto b, Pull(store, "b/part_0"));
  EXPECT_NEAR(b[0], -0.1, 1e-6);
}

TEST(ShardStoreSyncTest, AveragesReplicasDropsStaleAndRefusesAheadOrRepeat) {
  ShardStore store(0, 1);
  const std::string zeros = Bytes({0, 0});
  ASSERT_OK(store.Initialize(Job({"sgd", 1}, "sync", 3, 2), {Dense(Slice("v", 2, 1), zeros)}, {})
                .status());
  ASSERT_OK_AND_ASSIGN(auto applied, Push(store, {{"v/part_0", {1, 2}}}, 0));
  EXPECT_TRUE(applied[0]);
  // Not applied until 2 replicas are in; replica 0 waits for version 1.
  bool ready = true;
  ASSERT_OK(Pull(store, "v/part_0", {}, 0, &ready).status());
  EXPECT_FALSE(ready);
  auto again = Push(store, {{"v/part_0", {1, 1}}}, 0);
  EXPECT_EQ(again.status().message(), "replica 0 already pushed version 0 of v/part_0");
  auto ahead = Push(store, {{"v/part_0", {1, 1}, {}, 1}}, 1);
  EXPECT_EQ(ahead.status().message(),
            "sync push for version 1 of v/part_0 but it is at version 0: replica 1 did not wait "
            "for the step to complete");
  ASSERT_OK(Push(store, {{"v/part_0", {3, 4}}}, 1).status());
  EXPECT_EQ(store.global_step(), 1);
  ASSERT_OK_AND_ASSIGN(auto v, Pull(store, "v/part_0", {}, 0, &ready));
  EXPECT_TRUE(ready);
  EXPECT_EQ(v, (std::vector<float>{-2, -3}));  // minus the average
  // The backup replica 2 is late for version 0: dropped, counted, no change.
  ASSERT_OK_AND_ASSIGN(applied, Push(store, {{"v/part_0", {100, 100}}}, 2));
  EXPECT_FALSE(applied[0]);
  ASSERT_OK_AND_ASSIGN(v, Pull(store, "v/part_0", {}, 2, &ready));
  EXPECT_TRUE(ready);
  EXPECT_EQ(v, (std::vector<float>{-2, -3}));
  EXPECT_EQ(store.Stats()[0].dropped_stale, 1);
  EXPECT_EQ(store.Stats()[0].version, 1);
}

TEST(ShardStoreSspTest, FastestReplicaWaitsWhenMoreThanSAhead) {
  ShardStore store(0, 1);
  const std::string zero = Bytes({0});
  ASSERT_OK(
      store.Initialize(Job({"sgd", 1}, "ssp:1", 2), {Dense(Slice("v", 1, 1), zero)}, {}).status());
  bool ready = false;
  ASSERT_OK(Push(store, {{"v/part_0", {1}}}, 0).status());  // replica 0 at clock 1
  ASSERT_OK(Pull(store, "v/part_0", {}, 0, &ready).status());
  EXPECT_TRUE(ready);                                       // 1 ahead of replica 1: allowed
  ASSERT_OK(Push(store, {{"v/part_0", {1}}}, 0).status());  // clock 2: S+1 ahead
  ASSERT_OK(Pull(store, "v/part_0", {}, 0, &ready).status());
  EXPECT_FALSE(ready);
  ASSERT_OK(Pull(store, "v/part_0", {}, 1, &ready).status());
  EXPECT_TRUE(ready);  // the slow one never waits
  ASSERT_OK(Push(store, {{"v/part_0", {1}}}, 1).status());
  ASSERT_OK_AND_ASSIGN(auto v, Pull(store, "v/part_0", {}, 0, &ready));
  EXPECT_TRUE(ready);
  EXPECT_EQ(v, (std::vector<float>{-3}));  // every push applied on arrival
}

TEST(ShardStoreEmbeddingTest, PushesPastTheRowLimitAreRefusedWholeAndPullsCreateNothing) {
  OptimizerSpec sgd;
  sgd.name = "sgd";
  sgd.learning_rate = 1.0f;
  ShardStore store(0, 1, /*max_table_rows=*/3);
  ASSERT_OK(store.Initialize(Job(sgd), {}, {{"emb", 1000000, 2, "", "zeros"}}).status());
  // A client pulling a million distinct ids grows nothing.
  for (int64_t first = 0; first < 1000000; first += 50000) {
    std::vector<int64_t> ids(50000);
    for (int64_t i = 0; i < 50000; ++i) ids[i] = first + i;
    ASSERT_OK(Pull(store, "emb", ids).status());
  }
  EXPECT_EQ(store.Stats()[0].rows, 0);
  ASSERT_OK(Push(store, {{"emb", {1, 1, 1, 1}, {7, 8}}}).status());
  // Two more rows would make 4: refused whole, naming the limit.
  auto over = Push(store, {{"emb", {1, 1, 1, 1}, {9, 10}}});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "table emb would grow to 4 rows on ps:0; the limit is 3 (--max_table_rows)");
  EXPECT_EQ(store.Stats()[0].rows, 2);
  ASSERT_OK_AND_ASSIGN(auto nine, Pull(store, "emb", {9}));
  EXPECT_EQ(nine, std::vector<float>({0, 0}));
  // Rows that exist take more updates; one new row still fits.
  ASSERT_OK(Push(store, {{"emb", {1, 1, 1, 1, 1, 1}, {7, 8, 9}}}).status());
  ASSERT_OK_AND_ASSIGN(auto rows, Pull(store, "emb", {7, 8, 9}));
  EXPECT_EQ(rows, std::vector<float>({-2, -2, -2, -2, -1, -1}));
  EXPECT_EQ(store.Stats()[0].rows, 3);
}

TEST(ShardStoreEmbeddingTest, RowsAreLazyDeterministicAndUpdatedPerRow) {
  OptimizerSpec adam;
  adam.name = "adam";
  adam.learning_rate = 0.1f;
  ShardStore a(0, 2), b(0, 2);
  // Ids owned by ps:0 of 2.
  std::vector<int64_t> mine;
  for (int64_t id = 0; mine.size() < 3; ++id) {
    if (EmbeddingOwner(id, 2) == 0) mine.push_back(id);
  }
  ASSERT_OK(a.Initialize(Job(adam), {}, {{"emb", 1000, 4, "", "uniform:0.5"}}).status());
  ASSERT_OK(b.Initialize(Job(adam), {}, {{"emb", 1000, 4, "", "uniform:0.5"}}).status());
  ASSERT_OK_AND_ASSIGN(auto r0, Pull(a, "emb", {mine[0], mine[1]}));
  ASSERT_EQ(r0.size(), 8u);
  // Pulling creates nothing: rows not pushed yet are read from the seed.
  EXPECT_EQ(a.Stats()[0].rows, 0);
  // Another store with the same seed creates the same rows, in any order.
  ASSERT_OK_AND_ASSIGN(auto r1, Pull(b, "emb", {mine[1], mine[0]}));
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(r0[j], r1[4 + j]);
    EXPECT_EQ(r0[4 + j], r1[j]);
  }
  // A push moves only the named rows; a repeated id adds up (2 * 0.5 = 1).
  ASSERT_OK(Push(a, {{"emb", {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {mine[0], mine[0]}}})
                .status());
  ASSERT_OK_AND_ASSIGN(auto after, Pull(a, "emb", {mine[0], mine[1], mine[2]}));
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(after[j], r0[j] - 0.1f, 1e-6);  // Adam's first step moves by lr
    EXPECT_EQ(after[4 + j], r0[4 + j]);         // untouched row, untouched slots
  }
  EXPECT_EQ(a.Stats()[0].rows, 1);
  // Lazy Adam: the untouched row's first update is again a step of exactly lr.
  ASSERT_OK(Push(a, {{"emb", {-1, -1, -1, -1}, {mine[1]}}}).status());
  ASSERT_OK_AND_ASSIGN(auto second, Pull(a, "emb", {mine[1]}));
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(second[j], r0[4 + j] + 0.1f, 1e-6);

  int64_t theirs = 0;
  while (EmbeddingOwner(theirs, 2) == 0) ++theirs;
  auto bad = Pull(a, "emb", {theirs});
  EXPECT_EQ(bad.status().message(),
            absl::StrCat("id ", theirs, " of table emb belongs to ps:1, not ps:0"));
  auto range = Push(a, {{"emb", {1, 1, 1, 1}, {1000}}});
  EXPECT_EQ(range.status().message(), "id 1000 is out of range [0, 1000) for table emb");
  range = Push(a, {{"emb", {1, 1, 1, 1}, {-1}}});
  EXPECT_EQ(range.status().message(), "id -1 is out of range [0, 1000) for table emb");
}

// Dense table updates (Keras's Adam on an Embedding): every held row takes
// each push's step, with the table's count, a row outside the push on a
// zero gradient; the same pushes as lazy Adam leave different rows.
TEST(ShardStoreEmbeddingTest, DenseTableUpdatesStepEveryHeldRowWithTheTablesCount) {
  OptimizerSpec lazy;
  lazy.name = "adam";
  lazy.learning_rate = 0.1f;
  OptimizerSpec dense = lazy;
  dense.dense_table_updates = true;
  std::vector<int64_t> mine;
  for (int64_t id = 0; mine.size() < 2; ++id) {
    if (EmbeddingOwner(id, 1) == 0) mine.push_back(id);
  }
  ShardStore a(0, 1), b(0, 1);
  ASSERT_OK(a.Initialize(Job(dense), {}, {{"emb", 100, 2, "", "zeros"}}).status());
  ASSERT_OK(b.Initialize(Job(lazy), {}, {{"emb", 100, 2, "", "zeros"}}).status());
  for (ShardStore* s : {&a, &b}) {
    ASSERT_OK(Push(*s, {{"emb", {1, 1}, {mine[0]}}}).status());   // step 1: row 0
    ASSERT_OK(Push(*s, {{"emb", {1, 1}, {mine[1]}}}).status());   // step 2: row 1
  }
  ASSERT_OK_AND_ASSIGN(auto d, Pull(a, "emb", {mine[0], mine[1]}));
  ASSERT_OK_AND_ASSIGN(auto l, Pull(b, "emb", {mine[0], mine[1]}));
  // Lazy: each row one step of exactly lr. Dense: row 0 moved again at
  // step 2 on a zero gradient; row 1's first step took step 2's rate.
  EXPECT_NEAR(l[0], -0.1f, 1e-6);
  EXPECT_NEAR(l[2], -0.1f, 1e-6);
  EXPECT_LT(d[0], -0.1f - 1e-3f);
  EXPECT_NE(d[2], l[2]);
}

// A checkpoint taken mid-training and restored into a fresh store carries
// on exactly as the original: values, Adam's slots and step counts, and
// lazily created table rows with their own counts.
TEST(ShardCheckpointTest, SnapshotRestoredIntoAFreshStoreContinuesIdentically) {
  OptimizerSpec adam{"adam", 0.01f};
  const std::string init = Bytes({1, 2, 3, 4});
  auto make = [&](ShardStore& store) {
    ShardStore::EmbeddingInit table{"emb", 1000, 2, "", "uniform:0.1"};
    ASSERT_OK(store.Initialize(Job(adam), {Dense(Slice("w", 2, 2), init)}, {table}).status());
  };
  ShardStore a(0, 1), b(0, 1);
  make(a);
  make(b);
  for (int step = 0; step < 3; ++step) {
    ASSERT_OK(
        Push(a, {{"w/part_0", {0.5f, -1, 2, 0.25f}}, {"emb", {1, 2, 3, 4}, {7, 9}}}).status());
  }
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, a.Snapshot(3));
  EXPECT_EQ(snap.header.step(), 3);
  EXPECT_EQ(snap.header.num_slots(), 2);
  ASSERT_EQ(snap.tensors.size(), 2u);
  // Through the file format too.
  const std::string path = ShardPath(::testing::TempDir() + "/store_ckpt", 3, 0, 1);
  ASSERT_OK(ckpt::WriteShard(path, snap).status());
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents read, ckpt::ReadShard(path));
  ASSERT_OK(b.Restore(read));
  for (ShardStore* s : {&a, &b}) {
    ASSERT_OK(Push(*s, {{"w/part_0", {1, 1, 1, 1}}, {"emb", {1, 1, 1, 1}, {7, 11}}}).status());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<float> wa, Pull(a, "w/part_0"));
  ASSERT_OK_AND_ASSIGN(std::vector<float> wb, Pull(b, "w/part_0"));
  EXPECT_EQ(wa, wb);  // bit for bit, Adam's t included
  ASSERT_OK_AND_ASSIGN(std::vector<float> ea, Pull(a, "emb", {7, 9, 11}));
  ASSERT_OK_AND_ASSIGN(std::vector<float> eb, Pull(b, "emb", {7, 9, 11}));
  EXPECT_EQ(ea, eb);
  EXPECT_EQ(a.global_step(), b.global_step());
  EXPECT_EQ(b.global_step(), 4);
}

// Each replica's applied pushes are counted per dense tensor, written to a
// checkpoint and restored with it: where an async replica that starts again
// is in its own schedule. A checkpoint without them leaves them unknown.
TEST(ShardCheckpointTest, EachReplicasPushesAreCountedAndRestored) {
  auto make = [&](ShardStore& store) {
    ASSERT_OK(store
                  .Initialize(Job({"sgd", 0.1f}, "async", 3),
                              {Dense(Slice("w", 2, 2), Bytes({1, 2, 3, 4}))}, {})
                  .status());
  };
  ShardStore a(0, 1), b(0, 1), c(0, 1);
  make(a);
  make(b);
  make(c);
  for (int replica : {0, 2, 2, 0, 2}) {
    ASSERT_OK(Push(a, {{"w/part_0", {1, 1, 1, 1}}}, replica).status());
  }
  auto counts = [](ShardStore& store) {
    for (const TensorStats& s : store.Stats()) {
      if (s.key == "w/part_0") return s.replica_pushes;
    }
    return std::vector<int64_t>{-1};
  };
  EXPECT_EQ(counts(a), (std::vector<int64_t>{2, 0, 3}));
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, a.Snapshot(5));
  ASSERT_EQ(snap.tensors.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>(snap.tensors[0].replica_pushes().begin(),
                                 snap.tensors[0].replica_pushes().end()),
            (std::vector<int64_t>{2, 0, 3}));
  ASSERT_OK(b.Restore(snap));
  EXPECT_EQ(counts(b), (std::vector<int64_t>{2, 0, 3}));
  ASSERT_OK(Push(b, {{"w/part_0", {1, 1, 1, 1}}}, 1).status());
  EXPECT_EQ(counts(b), (std::vector<int64_t>{2, 1, 3}));
  snap.tensors[0].clear_replica_pushes();  // as written before the counts
  ASSERT_OK(c.Restore(snap));
  EXPECT_TRUE(counts(c).empty());
}

// A numbered push that a tensor applied already (a replica resumed from the
// fewest count over its slices, a push landed on one PS before a crash and
// sent again) is answered with the values as they are and applied once:
// through a restore of the checkpoint that holds it, in a batch with a
// tensor that did not take it yet, and on each answer path (a reply buffer,
// the payload rewritten, the in-place exchange of SGD).
TEST(ShardStoreRepeatTest, ANumberedPushIsAppliedOnceInEachTensor) {
  ShardStore store(0, 1);
  ASSERT_OK(store
                .Initialize(Job({"sgd", 0.5f}, "async", 2),
                            {Dense(Slice("w", 2, 1), Bytes({1, 2})),
                             Dense(Slice("b", 1, 1), Bytes({0}))},
                            {})
                .status());
  // push(replica, number, tensors, gradient 2 each) with the answer read
  // back into a reply buffer.
  auto push = [&](int replica, int64_t number, std::vector<std::string> keys,
                  std::vector<ShardStore::Pulled>* pulled = nullptr) {
    ShardStore::PushBatch batch;
    batch.replica = replica;
    batch.push_number = number;
    std::string payload;
    for (const std::string& k : keys) {
      batch.tensors.push_back({k, {}, 0, -1});
      payload += Bytes(k == "w/part_0" ? std::vector<float>{2, 2} : std::vector<float>{2});
    }
    std::vector<char> back(payload.size());
    if (pulled != nullptr) {
      batch.read_back = back.data();
      batch.read_back_versions = pulled;
    }
    Payload received;
    received.Append(payload.data(), static_cast<int64_t>(payload.size()));
    auto applied = store.Push(batch, received);
    return std::make_pair(applied, std::string(back.begin(), back.end()));
  };
  auto stat = [&](const std::string& key) {
    for (const TensorStats& s : store.Stats()) {
      if (s.key == key) return s;
    }
    return TensorStats{};
  };
  ASSERT_OK(push(0, 1, {"w/part_0", "b/part_0"}).first.status());  // w {0, 1}, b {-1}
  // Sent again: answered as applied, with the values as they are.
  std::vector<ShardStore::Pulled> pulled;
  auto [again, answer] = push(0, 1, {"w/part_0", "b/part_0"}, &pulled);
  ASSERT_OK(again.status());
  EXPECT_EQ(*again, (std::vector<bool>{true, true}));
  EXPECT_EQ(answer, Bytes({0, 1}) + Bytes({-1}));
  ASSERT_EQ(pulled.size(), 2u);
  EXPECT_EQ(pulled[0].version, 1);
  EXPECT_EQ(stat("w/part_0").replica_pushes, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(stat("w/part_0").repeated_pushes, 1);
  EXPECT_EQ(stat("b/part_0").repeated_pushes, 1);
  // Another replica's push 1 is its own; unnumbered pushes are applied.
  ASSERT_OK(push(1, 1, {"w/part_0"}).first.status());  // w {-1, 0}
  ASSERT_OK(push(1, 0, {"w/part_0"}).first.status());  // w {-2, -1}
  EXPECT_EQ(stat("w/part_0").replica_pushes, (std::vector<int64_t>{1, 2}));
  // A checkpoint cut after w took replica 0's push 2 and before b did.
  ASSERT_OK(push(0, 2, {"w/part_0"}).first.status());  // w {-3, -2}
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(4));
  ASSERT_OK(push(0, 2, {"b/part_0"}).first.status());  // b {-2}
  ASSERT_OK(store.Restore(snap));                    // b {-1} again
  // The replica resumes at the fewest count (1) and sends push 2 whole:
  // b takes it, w had it.
  pulled.clear();
  auto [resent, values] = push(0, 2, {"w/part_0", "b/part_0"}, &pulled);
  ASSERT_OK(resent.status());
  EXPECT_EQ(values, Bytes({-3, -2}) + Bytes({-2}));
  EXPECT_EQ(stat("w/part_0").replica_pushes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(stat("b/part_0").replica_pushes, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(stat("w/part_0").version, 4);
  EXPECT_EQ(stat("b/part_0").version, 2);

  // The in-place answers: push 2 again, gradient in a writable payload.
  for (bool sgd_exchange : {true, false}) {
    SCOPED_TRACE(sgd_exchange ? "exchanged" : "rewritten");
    Received frame(Bytes({2, 2}) + Bytes({2}), 3);
    ShardStore::PushBatch batch;
    batch.replica = 0;
    batch.push_number = 2;
    batch.tensors = {{"w/part_0", {}, 0, -1}, {"b/part_0", {}, 0, -1}};
    ShardStore::PushBatch::InPlaceAnswer in_place;
    std::vector<ShardStore::Pulled> versions;
    batch.read_back_in_payload = &frame.payload;
    batch.read_back_in_place = &in_place;
    batch.read_back_versions = &versions;
    if (!sgd_exchange) {
      // A batch where w has the push and b does not yet: b applies it, so
      // the answer cannot be exchanged whole; both come back in the payload.
      ASSERT_OK(store.Restore(snap));  // b {-1}, its count for replica 0 back to 1
    }
    ASSERT_OK(store.Push(batch, frame.payload).status());
    const std::string expected = Bytes({-3, -2}) + Bytes({-2});
    if (sgd_exchange) {
      EXPECT_EQ(in_place.in_payload, true);  // a repeat is not exchanged
    }
    EXPECT_EQ(in_place.in_payload ? frame.Bytes() : Joined(in_place.held), expected);
    ASSERT_OK_AND_ASSIGN(auto w, Pull(store, "w/part_0"));
    EXPECT_EQ(w, (std::vector<float>{-3, -2}));
    ASSERT_OK_AND_ASSIGN(auto b, Pull(store, "b/part_0"));
    EXPECT_EQ(b, (std::vector<float>{-2}));
  }
  // A non-finite gradient beside a repeat is still refused, nothing changed.
  ASSERT_OK(store.Restore(snap));
  Received bad(Bytes({1, 1}) + Bytes({NAN}), 4);
  ShardStore::PushBatch batch;
  batch.push_number = 2;
  batch.tensors = {{"w/part_0", {}, 0, -1}, {"b/part_0", {}, 0, -1}};
  ShardStore::PushBatch::InPlaceAnswer in_place;
  batch.read_back_in_payload = &bad.payload;
  batch.read_back_in_place = &in_place;
  EXPECT_EQ(store.Push(batch, bad.payload).status().message(),
            "gradient for b/part_0 has a non-finite value (nan) at element 0");
  EXPECT_EQ(stat("b/part_0").version, 1);
}

// Sync tensors ignore push numbers: a round's version says whether a push
// is late.
TEST(ShardStoreRepeatTest, SyncTensorsGoByTheRoundNotTheNumber) {
  ShardStore store(0, 1);
  ASSERT_OK(store
                .Initialize(Job({"sgd", 1.0f}, "sync", 1),
                            {Dense(Slice("w", 1, 1), Bytes({1}))}, {})
                .status());
  for (int64_t version : {0, 1}) {
    ShardStore::PushBatch batch;
    batch.push_number = 1;
    batch.tensors = {{"w/part_0", {}, version, -1}};
    Payload p;
    const std::string g = Bytes({1});
    p.Append(g.data(), 4);
    ASSERT_OK_AND_ASSIGN(auto applied, store.Push(batch, p));
    EXPECT_EQ(applied, (std::vector<bool>{true}));
  }
  ASSERT_OK_AND_ASSIGN(auto w, Pull(store, "w/part_0"));
  EXPECT_EQ(w, (std::vector<float>{-1}));
}

// After a restore under a new generation, pushes and pulls of the old one
// are refused (a replica must pull again), those of the new one and
// unchecked ones (generation 0) served; a sync pull parked before the
// restore fails instead of waiting on.
TEST(ShardCheckpointTest, RequestsOfAnOlderGenerationAreAbortedAfterARestore) {
  ShardStore::JobConfig job = Job({"sgd", 1.0f}, "sync", 2);
  job.generation = 1;
  ShardStore store(0, 1);
  ASSERT_OK(store.Initialize(job, {Dense(Slice("w", 1, 2), Bytes({1, 1}))}, {}).status());
  EXPECT_EQ(store.generation(), 1);
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents step0, store.Snapshot(0));
  ASSERT_OK(Push(store, {{"w/part_0", {1, 1}}}, 0, "", 1).status());
  bool ready = true;
  ASSERT_OK(Pull(store, "w/part_0", {}, 0, &ready, nullptr, 1).status());
  EXPECT_FALSE(ready);  // replica 1 has not pushed step 0
  ASSERT_OK(store.Restore(step0, 2));
  EXPECT_EQ(store.generation(), 2);
  auto parked = Pull(store, "w/part_0", {}, 0, &ready, nullptr, 1);
  EXPECT_EQ(parked.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(parked.status().message(),
            "ps:0 was restored from the checkpoint at step 0 (generation 2); this request is of "
            "generation 1: pull again and carry on from there");
  auto pushed = Push(store, {{"w/part_0", {1, 1}}}, 1, "", 1);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kAborted);
  ASSERT_OK(Push(store, {{"w/part_0", {1, 1}}}, 0, "", 2).status());
  ASSERT_OK(Push(store, {{"w/part_0", {3, 3}}}, 1, "", 0).status());
  ASSERT_OK_AND_ASSIGN(std::vector<float> w, Pull(store, "w/part_0", {}, 0, &ready, nullptr, 2));
  EXPECT_EQ(w, (std::vector<float>{-1, -1}));  // 1 - mean(1, 3): the old push left no trace
}

// A PS that started again has no variables: a request naming the
// generation its replica trained on is Aborted, as after a restore, so the
// replica waits for the chief's restore instead of failing; one naming no
// generation gets the plain error.
TEST(ShardCheckpointTest, RequestsOfAGenerationToAPsThatStartedAgainAreAborted) {
  ShardStore store(0, 2);
  auto pushed = Push(store, {{"w/part_0", {1, 1}}}, 0, "", 3);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(pushed.status().message(),
            "ps:0 has no variables: it started again since this request's generation 3 was "
            "served; wait for the chief to restore it");
  auto pulled = Pull(store, "w/part_0", {}, 0, nullptr, nullptr, 3);
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kAborted);
  auto unchecked = Push(store, {{"w/part_0", {1, 1}}});
  EXPECT_EQ(unchecked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(unchecked.status().message(),
            "ps:0 has no variables yet: the chief has not initialised them");
  EXPECT_EQ(Pull(store, "w/part_0").status().code(), absl::StatusCode::kFailedPrecondition);
}

// A snapshot holds no tensor's lock while it copies: pushes go on (here on
// the very thread that is snapshotting, which would deadlock on a held
// lock), land in a copy of the buffer, and the snapshot keeps the values of
// its moment; an async table is copied afterwards under its own lock, and
// so holds what was pushed before that.
TEST(ShardCheckpointTest, SnapshotCopiesWithoutHoldingTheLocks) {
  ShardStore store(0, 1);
  ShardStore::EmbeddingInit table{"emb", 1000, 2, "", "zeros"};
  ASSERT_OK(store
                .Initialize(Job({"momentum", 1.0f}), {Dense(Slice("w", 2, 2), Bytes({1, 2, 3, 4}))},
                            {table})
                .status());
  ASSERT_OK(Push(store, {{"w/part_0", {1, 1, 1, 1}}}).status());
  ASSERT_OK(Push(store, {{"emb", {1, 1}, {5}}}).status());
  ASSERT_OK_AND_ASSIGN(std::vector<float> w_then, Pull(store, "w/part_0", {}));
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(7, [&] {
    EXPECT_OK(Push(store, {{"w/part_0", {10, 10, 10, 10}}}).status());
    EXPECT_OK(Push(store, {{"emb", {2, 2}, {5}}}).status());
  }));
  ASSERT_EQ(snap.tensors.size(), 2u);
  const v1::TensorCheckpoint* w = nullptr;
  const v1::TensorCheckpoint* emb = nullptr;
  for (const v1::TensorCheckpoint& t : snap.tensors) (t.key() == "emb" ? emb : w) = &t;
  ASSERT_NE(w, nullptr);
  ASSERT_NE(emb, nullptr);
  // The dense record: the values and the momentum slot of before the push
  // in after_cut, and their update count.
  EXPECT_EQ(w->updates(), 1);
  std::vector<float> w_data(w->data().size() / 4);
  std::memcpy(w_data.data(), w->data().data(), w->data().size());
  ASSERT_EQ(w_data.size(), 8u);
  EXPECT_EQ(std::vector<float>(w_data.begin(), w_data.begin() + 4), w_then);
  EXPECT_EQ(std::vector<float>(w_data.begin() + 4, w_data.end()), (std::vector<float>{1, 1, 1, 1}));
  // The store went on: the push of 10s on top of 0.9 x the velocity of 1.
  ASSERT_OK_AND_ASSIGN(std::vector<float> w_now, Pull(store, "w/part_0", {}));
  ASSERT_EQ(w_now.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(w_now[i], w_then[i] - 10.9f, 1e-5) << i;
  // The async table was copied after the cut: both of its pushes are in.
  EXPECT_EQ(emb->updates(), 2);
  // Restoring the snapshot brings the moment back.
  ASSERT_OK(store.Restore(snap));
  ASSERT_OK_AND_ASSIGN(std::vector<float> w_back, Pull(store, "w/part_0", {}));
  EXPECT_EQ(w_back, w_then);
}

// A table record that disagrees with the table or repeats a row is refused
// whole; the table keeps its rows.
TEST(ShardCheckpointTest, RestoreRefusesABrokenTableRecord) {
  ShardStore store(0, 1);
  ShardStore::EmbeddingInit table{"emb", 1000, 2, "", "zeros"};
  ASSERT_OK(store.Initialize(Job({"adam", 0.1f}), {}, {table}).status());
  ASSERT_OK(Push(store, {{"emb", {1, 2, 3, 4}, {7, 9}}}).status());
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(1));
  ASSERT_OK_AND_ASSIGN(std::vector<float> before, Pull(store, "emb", {7, 9}));
  ckpt::ShardContents cut = snap;
  cut.tensors[0].mutable_data()->resize(40);
  EXPECT_EQ(store.Restore(cut).message(),
            "checkpoint for ps:0 of 1 at step 1: table emb holds 40 bytes; its 2 rows of dim 2 "
            "with 2 optimizer slots take 48");
  ckpt::ShardContents twice = snap;
  twice.tensors[0].set_row_ids(1, 7);
  EXPECT_EQ(store.Restore(twice).message(),
            "checkpoint for ps:0 of 1 at step 1: emb: row id 7 appears twice");
  ckpt::ShardContents dim = snap;
  dim.tensors[0].set_dim(3);
  // Rows of another width: a table of another model (not set aside).
  const absl::Status other = store.Restore(dim);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(),
            "checkpoint for ps:0 of 1 at step 1 is of another model: table emb has rows of dim 3, "
            "not 2");
  ASSERT_OK_AND_ASSIGN(std::vector<float> after, Pull(store, "emb", {7, 9}));
  EXPECT_EQ(after, before);
  EXPECT_OK(store.Restore(snap));
}

TEST(ShardCheckpointTest, RestoreRefusesAShardThatDoesNotFitAndKeepsTheValues) {
  ShardStore a(0, 1), b(0, 1);
  ASSERT_OK(a.Initialize(Job({"sgd", 0.1f}), {Dense(Slice("w", 2, 2), Bytes({1, 2, 3, 4}))}, {})
                .status());
  ASSERT_OK(
      b.Initialize(Job({"sgd", 0.1f}), {Dense(Slice("w", 2, 3), Bytes({5, 5, 5, 5, 5, 5}))}, {})
          .status());
  ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, a.Snapshot(0));
  EXPECT_EQ(b.Restore(snap).message(),
            "checkpoint for ps:0 of 1 at step 0 is of another model: w/part_0: 16 bytes, expected "
            "24 (6 values and "
            "their 0 optimizer slots)");
  // Stray bytes after the floats are not read past.
  snap.tensors[0].mutable_data()->resize(26, '\0');
  EXPECT_EQ(b.Restore(snap).message(),
            "checkpoint for ps:0 of 1 at step 0 is of another model: w/part_0: 26 bytes, expected "
            "24 (6 values and "
            "their 0 optimizer slots)");
  snap.tensors[0].set_key("v/part_0");
  EXPECT_EQ(b.Restore(snap).message(),
            "checkpoint for ps:0 of 1 at step 0 is of another model: it holds v/part_0, which this "
            "job does not have");
  snap.tensors.clear();
  EXPECT_EQ(b.Restore(snap).message(),
            "checkpoint for ps:0 of 1 at step 0 is of another model: it lacks w/part_0");
  ASSERT_OK_AND_ASSIGN(std::vector<float> w, Pull(b, "w/part_0"));
  EXPECT_EQ(w, std::vector<float>(6, 5.0f));
  ShardStore empty(0, 1);
  EXPECT_EQ(empty.Snapshot(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

ShardStore::DenseInit NonTrainable(const SliceDef& def, const std::string& value,
                                   VariableUpdate update) {
  ShardStore::DenseInit d = Dense(def, value);
  d.update = update;
  return d;
}

// Batch normalization's moving statistics beside an Adam kernel: no slots,
// increments added as they are (async: each one; sync: the round's mean),
// a frozen tensor refuses pushes and never holds the global step back.
TEST(ShardStoreNonTrainableTest, IncrementsAreAddedAsTheyAreAndFrozenTensorsTakeNoPush) {
  OptimizerSpec adam{"adam", 0.1f};
  for (const std::string mode : {"async", "sync"}) {
    SCOPED_TRACE(mode);
    ShardStore store(0, 1);
    ASSERT_OK(store
                  .Initialize(Job(adam, mode, 2),
                              {Dense(Slice("k", 1, 2), Bytes({1, 1})),
                               NonTrainable(Slice("bn/moving_mean", 2, 1), Bytes({0.5f, -1}),
                                            VariableUpdate::kIncrement),
                               NonTrainable(Slice("frozen/kernel", 1, 1), Bytes({3}),
                                            VariableUpdate::kFrozen)},
                              {})
                  .status());
    ASSERT_OK(Push(store, {{"k/part_0", {1, 1}}, {"bn/moving_mean/part_0", {0.25f, 2}}}, 0)
                  .status());
    ASSERT_OK(Push(store, {{"k/part_0", {1, 1}}, {"bn/moving_mean/part_0", {0.75f, 4}}}, 1)
                  .status());
    ASSERT_OK_AND_ASSIGN(auto mean, Pull(store, "bn/moving_mean/part_0"));
    if (mode == "async") {
      EXPECT_EQ(mean, (std::vector<float>{1.5f, 5}));  // each replica's, once
    } else {
      EXPECT_EQ(mean, (std::vector<float>{1, 2}));  // their mean, once
    }
    EXPECT_EQ(store.global_step(), 2 - (mode == "sync"));
    auto frozen = Push(store, {{"frozen/kernel/part_0", {1}}}, 0);
    EXPECT_EQ(frozen.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(frozen.status().message(),
              "push names frozen/kernel/part_0, which is frozen (its layer has trainable: false)");
    ASSERT_OK_AND_ASSIGN(auto kept, Pull(store, "frozen/kernel/part_0"));
    EXPECT_EQ(kept, (std::vector<float>{3}));
    // Checkpointed without slots, the update named; Adam's kernel with its two.
    ASSERT_OK_AND_ASSIGN(ckpt::ShardContents snap, store.Snapshot(2));
    ASSERT_EQ(snap.tensors.size(), 3u);
    EXPECT_EQ(snap.tensors[0].data().size(), 2u * 3 * 4);
    EXPECT_EQ(snap.tensors[0].update(), "");
    EXPECT_EQ(snap.tensors[1].data().size(), 2u * 4);
    EXPECT_EQ(snap.tensors[1].update(), "increment");
    EXPECT_EQ(snap.tensors[2].data().size(), 4u);
    EXPECT_EQ(snap.tensors[2].update(), "frozen");
    ShardStore restored(0, 1);
    ASSERT_OK(restored
                  .Initialize(Job(adam, mode, 2),
                              {Dense(Slice("k", 1, 2), Bytes({0, 0})),
                               NonTrainable(Slice("bn/moving_mean", 2, 1), Bytes({0, 0}),
                                            VariableUpdate::kIncrement),
                               NonTrainable(Slice("frozen/kernel", 1, 1), Bytes({0}),
                                            VariableUpdate::kFrozen)},
                              {}, /*await_restore=*/true)
                  .status());
    ASSERT_OK(restored.Restore(snap));
    ASSERT_OK_AND_ASSIGN(auto back, Pull(restored, "bn/moving_mean/part_0"));
    EXPECT_EQ(back, mean);
    // The same checkpoint does not fit a job that trains the statistics
    // (it holds no slots for them).
    ShardStore trains(0, 1);
    ASSERT_OK(trains
                  .Initialize(Job(adam, mode, 2),
                              {Dense(Slice("k", 1, 2), Bytes({0, 0})),
                               Dense(Slice("bn/moving_mean", 2, 1), Bytes({0, 0})),
                               NonTrainable(Slice("frozen/kernel", 1, 1), Bytes({0}),
                                            VariableUpdate::kFrozen)},
                              {}, /*await_restore=*/true)
                  .status());
    const absl::Status other = trains.Restore(snap);
    EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(other.message().find("bn/moving_mean/part_0: 8 bytes, expected 24"),
              std::string::npos)
        << other.message();
  }
}

}  // namespace
}  // namespace pstrain::ps
