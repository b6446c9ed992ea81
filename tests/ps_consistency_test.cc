// Consistency modes and input checks of the PS, over real gRPC on loopback:
// PS servers in this process, one PsClient per replica as workers use them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/checkpoint_shard.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/ps_stream.h"
#include "cluster/placement.h"
#include "base/testing/status_testing.h"
#include "base/testing/temp_dir.h"
#include "transport/wire_frame.h"
#include "gmock/gmock.h"
#include "base/testing/fake_clock.h"
#include "base/testing/wait_until.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain {
namespace {

using client::CreateOptions;
using client::PsClient;
using client::PsClientOptions;

// A model with one variable split across 2 PS (2 x 64 KiB slices), a small
// one, and an embedding table.
class PsConsistencyTest : public ::testing::Test {
 protected:
  void Start(const std::string& mode, int replicas, int aggregate = 0,
             const std::string& emb_mode = "", ps::PsServiceOptions options = {},
             int max_message_bytes = 512 << 20, bool tcp_frames = true,
             const Clock* clock = Clock::Real()) {
    ASSERT_OK_AND_ASSIGN(ps_, ps::testing::LocalPs::Start(2, options, max_message_bytes, clock));
    VariableDef emb{"emb", {1000, 8}};
    emb.embedding = true;
    if (!emb_mode.empty()) emb.consistency = *ParseConsistency(emb_mode);
    variables_ = {{"w", {256, 128}}, {"b", {10}}, emb};
    PlacementOptions popts;
    popts.min_slice_bytes = 64 * 1024;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement(variables_, 2, popts));
    ASSERT_EQ(placement_.SlicesOf("w").size(), 2u);
    offsets_ = {0, 256 * 128, 256 * 128 + 10};
    total_ = 256 * 128 + 10;
    for (int r = 0; r < replicas; ++r) {
      client::PsClientOptions o;
      o.ps_addresses = ps_->addresses();
      o.replica = r;
      o.consistency = *ParseConsistency(mode);
      o.rpc_deadline = absl::Seconds(10);
      o.wait_deadline = absl::Seconds(10);
      o.tcp_frames = tcp_frames;
      ASSERT_OK_AND_ASSIGN(auto c, client::PsClient::Create(o, placement_));
      clients_.push_back(std::move(c));
    }
    init_.resize(total_);
    for (int64_t i = 0; i < total_; ++i) init_[i] = static_cast<float>(i % 7);
    client::CreateOptions create;
    create.optimizer = {"sgd", 1.0f};
    create.consistency = *ParseConsistency(mode);
    create.num_replicas = replicas;
    create.replicas_to_aggregate = aggregate;
    ASSERT_OK(client::PsAdmin(&clients_[0]->control()).CreateVariables(placement_, init_, offsets_, create).status());
  }

  // Every replica pushes zeros and pulls the values back, over and over, on
  // a thread of its own, until Stop() or the destructor; each one's first
  // error ends its loop and stays in results().
  class Pushers {
   public:
    explicit Pushers(PsConsistencyTest* test) : results_(test->clients_.size()) {
      for (size_t c = 0; c < test->clients_.size(); ++c) {
        threads_.emplace_back([this, test, c] {
          const std::vector<float> zeros(test->total_, 0.0f);
          std::vector<float> params(test->total_);
          for (int k = 0; k < 1'000'000 && !stop_ && results_[c].ok(); ++k) {
            results_[c] = test->clients_[c]
                              ->PushPullAll(zeros.data(), params.data(), test->offsets_)
                              .status();
            rounds_.fetch_add(1);
          }
        });
      }
    }
    ~Pushers() { Stop(); }
    void Stop() {
      stop_ = true;
      for (auto& t : threads_) {
        if (t.joinable()) t.join();
      }
    }
    int64_t rounds() const { return rounds_.load(); }
    const std::vector<absl::Status>& results() const { return results_; }

   private:
    std::atomic<bool> stop_{false};
    std::atomic<int64_t> rounds_{0};
    std::vector<absl::Status> results_;
    std::vector<std::thread> threads_;
  };

  // Replica r's gradient: every element r + 1, exactly representable, so
  // sums in any order are exact.
  std::vector<float> GradOf(int r) const { return std::vector<float>(total_, r + 1.0f); }

  int64_t DroppedOnAllPs(const std::string& variable) {
    auto stats = clients_[0]->Stats();
    EXPECT_OK(stats.status());
    int64_t dropped = 0;
    for (const auto& s : *stats) {
      for (const auto& sl : s.slices()) {
        if (sl.variable() == variable) dropped += sl.dropped_stale();
      }
    }
    return dropped;
  }

  // For tests whose PS wait on a fake clock: outlives the PS.
  pstrain::testing::FakeClock clock_;
  std::unique_ptr<ps::testing::LocalPs> ps_;
  std::vector<VariableDef> variables_;
  Placement placement_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
  std::vector<float> init_;
  std::vector<std::unique_ptr<client::PsClient>> clients_;
};

TEST_F(PsConsistencyTest, SyncUpdateEqualsTheAverageGradientUpdate) {
  Start("sync", 3);
  std::vector<std::vector<float>> pulled(3, std::vector<float>(total_));
  for (int r = 0; r < 3; ++r) ASSERT_OK(clients_[r]->PullAll(pulled[r].data(), offsets_).status());
  std::vector<std::thread> replicas;
  std::vector<absl::Status> results(3);
  std::vector<int64_t> steps(3);
  for (int r = 0; r < 3; ++r) {
    replicas.emplace_back([&, r] {
      const std::vector<float> g = GradOf(r);
      auto step = clients_[r]->PushPullAll(g.data(), pulled[r].data(), offsets_);
      results[r] = step.status();
      if (step.ok()) steps[r] = *step;
    });
  }
  for (auto& t : replicas) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK(results[r]);
    EXPECT_EQ(steps[r], 1);
    // lr 1, average of 1, 2, 3 = 2: every replica sees exactly init - 2.
    for (int64_t i = 0; i < total_; ++i) {
      ASSERT_EQ(pulled[r][i], init_[i] - 2.0f) << "replica " << r << " element " << i;
    }
  }
  EXPECT_EQ(DroppedOnAllPs("w"), 0);

  // Once the job's last step is reached, a replica starting another round
  // does not wait for replicas that have stopped.
  clients_[0]->set_stop_step(1);
  const std::vector<float> g = GradOf(0);
  ASSERT_OK_AND_ASSIGN(int64_t step,
                       clients_[0]->PushPullAll(g.data(), pulled[0].data(), offsets_));
  EXPECT_EQ(step, 1);
  // An observer (the chief) reads the values at once, mid-step.
  client::PsClientOptions o;
  o.ps_addresses = ps_->addresses();
  o.replica = -1;
  o.wait_deadline = absl::Seconds(5);
  ASSERT_OK_AND_ASSIGN(auto observer, client::PsClient::Create(o, placement_));
  std::vector<float> seen(total_);
  ASSERT_OK(observer->PullAll(seen.data(), offsets_).status());
  EXPECT_EQ(seen, pulled[1]);
}

TEST_F(PsConsistencyTest, SyncPullWaitsForTheStepAndTimesOutNamingWhoIsMissing) {
  ps::PsServiceOptions options;
  options.wait_timeout = absl::Milliseconds(400);
  Start("sync", 2, 0, "", options);
  std::vector<float> params(total_);
  ASSERT_OK(clients_[0]->PullAll(params.data(), offsets_).status());
  const std::vector<float> g = GradOf(0);
  auto r = clients_[0]->PushPullAll(g.data(), params.data(), offsets_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("pull waited 400ms: "), absl::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("is at step 0 and replica 0 needs step 1; 1 of 2 "
                                      "gradients are in, none yet from replicas 1"),
            absl::string_view::npos)
      << r.status();
}

// A push that completes no round wakes no waiting pull; the timeout still
// names only the replica still missing, not one that pushed meanwhile. The
// PS's waits run on a fake clock: the timeout comes when the test moves it.
TEST_F(PsConsistencyTest, SyncTimeoutNamesOnlyWhoIsStillMissing) {
  ps::PsServiceOptions options;
  options.wait_timeout = absl::Milliseconds(1500);
  Start("sync", 3, 0, "", options, 512 << 20, true, &clock_);
  std::vector<float> p0(total_), p1(total_);
  ASSERT_OK(clients_[0]->PullAll(p0.data(), offsets_).status());
  ASSERT_OK(clients_[1]->PullAll(p1.data(), offsets_).status());
  const std::vector<float> g0 = GradOf(0), g1 = GradOf(1);
  absl::Status waited;
  std::thread t0(
      [&] { waited = clients_[0]->PushPullAll(g0.data(), p0.data(), offsets_).status(); });
  // Replica 1 pushes once replica 0's pull is parked on both PS.
  ASSERT_TRUE(pstrain::testing::WaitUntil([&] {
    return ps_->store(0).wait_list().parked() == 1 && ps_->store(1).wait_list().parked() == 1;
  }));
  ASSERT_OK(clients_[1]->PushAll(g1.data(), offsets_));
  clock_.Advance(absl::Milliseconds(1499));
  EXPECT_EQ(ps_->store(0).wait_list().parked(), 1) << "expired before its time";
  clock_.Advance(absl::Milliseconds(1));
  t0.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_NE(waited.message().find("2 of 3 gradients are in, none yet from replicas 2"),
            absl::string_view::npos)
      << waited;
}

TEST_F(PsConsistencyTest, StaleGradientFromABackupChangesNothingAndIsCounted) {
  Start("sync", 3, /*aggregate=*/2);
  std::vector<float> p0(total_), p1(total_), p2(total_);
  ASSERT_OK(clients_[2]->PullAll(p2.data(), offsets_).status());  // the backup, at step 0
  ASSERT_OK(clients_[0]->PullAll(p0.data(), offsets_).status());
  ASSERT_OK(clients_[1]->PullAll(p1.data(), offsets_).status());
  const std::vector<float> g0 = GradOf(0), g1 = GradOf(1), g2 = GradOf(2);
  std::thread t0(
      [&] { ASSERT_OK(clients_[0]->PushPullAll(g0.data(), p0.data(), offsets_).status()); });
  ASSERT_OK(clients_[1]->PushPullAll(g1.data(), p1.data(), offsets_).status());
  t0.join();
  for (int64_t i = 0; i < total_; ++i) ASSERT_EQ(p1[i], init_[i] - 1.5f) << i;
  // The backup's gradient for step 0 arrives after the step completed.
  ASSERT_OK_AND_ASSIGN(int64_t step, clients_[2]->PushPullAll(g2.data(), p2.data(), offsets_));
  EXPECT_EQ(step, 1);
  for (int64_t i = 0; i < total_; ++i) ASSERT_EQ(p2[i], init_[i] - 1.5f) << i;
  EXPECT_EQ(clients_[2]->dropped_pushes(), 3);  // w's 2 slices and b
  EXPECT_EQ(clients_[0]->dropped_pushes(), 0);
  EXPECT_EQ(DroppedOnAllPs("w"), 2);
  EXPECT_EQ(DroppedOnAllPs("b"), 1);
}

TEST_F(PsConsistencyTest, SspFastestReplicaWaitsWhenSPlusOneClocksAhead) {
  Start("ssp:1", 2);
  std::vector<float> p0(total_), p1(total_);
  const std::vector<float> g = GradOf(0);
  ASSERT_OK(clients_[0]->PullAll(p0.data(), offsets_).status());
  // Clock 1: one ahead of replica 1 is allowed.
  ASSERT_OK(clients_[0]->PushPullAll(g.data(), p0.data(), offsets_).status());
  // Clock 2: two ahead; the pull must wait for replica 1.
  absl::Notification returned;
  std::thread fast([&] {
    ASSERT_OK(clients_[0]->PushPullAll(g.data(), p0.data(), offsets_).status());
    returned.Notify();
  });
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  ASSERT_OK(clients_[1]->PushAll(g.data(), offsets_));
  EXPECT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(10)));
  fast.join();
  // The pull was served after replica 1's push: all three are in.
  for (int64_t i = 0; i < total_; ++i) ASSERT_EQ(p0[i], init_[i] - 3.0f) << i;
  ASSERT_OK(clients_[1]->PullAll(p1.data(), offsets_).status());
  for (int64_t i = 0; i < total_; ++i) ASSERT_EQ(p1[i], init_[i] - 3.0f) << i;
}

TEST_F(PsConsistencyTest, AsyncLosesNoUpdate) {
  constexpr int kClients = 4, kPushes = 150;
  Start("async", kClients);
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      const std::vector<float> ones(total_, 1.0f);
      std::vector<float> params(total_);
      for (int k = 0; k < kPushes && results[c].ok(); ++k) {
        results[c] = clients_[c]->PushPullAll(ones.data(), params.data(), offsets_).status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : results) ASSERT_OK(s);
  std::vector<float> params(total_);
  ASSERT_OK_AND_ASSIGN(int64_t step, clients_[0]->PullAll(params.data(), offsets_));
  EXPECT_EQ(step, kClients * kPushes);
  for (int64_t i = 0; i < total_; ++i) {
    ASSERT_EQ(params[i], init_[i] - kClients * kPushes) << i;
  }
}

// Checkpoints taken while async replicas push to both PS: the hold the
// chief puts on every PS before it reads the step cuts the two shards at one
// moment, so each replica's pushes counted in them differ by at most the one
// it had in flight, and the step is that of the cut.
TEST_F(PsConsistencyTest, ACheckpointHoldingEveryPsCutsThemAtOneMoment) {
  constexpr int kClients = 3, kCheckpoints = 12;
  Start("async", kClients);
  Pushers pushers(this);
  const std::string dir = testing::TempDir() + "/one_cut";
  for (int k = 1; k <= kCheckpoints; ++k) {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_OK_AND_ASSIGN(const int64_t step, client::PsAdmin(&clients_[0]->control()).HoldPushes(absl::Seconds(10)));
    ASSERT_OK_AND_ASSIGN(auto saved, client::PsAdmin(&clients_[0]->control()).SaveCheckpoint(dir, k, absl::Seconds(30),
                                                                 /*release_hold=*/true));
    // Per replica, the fewest and most pushes any dense slice counted.
    std::vector<int64_t> fewest(kClients, -1), most(kClients, -1);
    int64_t highest_version = 0;
    for (const auto& shard : saved) {
      ASSERT_OK_AND_ASSIGN(ckpt::ShardContents contents, ckpt::ReadShard(shard.path()));
      for (const auto& t : contents.tensors) {
        if (t.replica_pushes_size() == 0) continue;  // the table
        ASSERT_EQ(t.replica_pushes_size(), kClients) << t.key();
        highest_version = std::max(highest_version, t.updates());
        for (int r = 0; r < kClients; ++r) {
          const int64_t n = t.replica_pushes(r);
          fewest[r] = fewest[r] < 0 ? n : std::min(fewest[r], n);
          most[r] = std::max(most[r], n);
        }
      }
    }
    int64_t total = 0;
    for (int r = 0; r < kClients; ++r) {
      EXPECT_LE(most[r] - fewest[r], 1)
          << "checkpoint " << k << ": replica " << r << "'s pushes differ across the shards";
      total += fewest[r];
    }
    EXPECT_GE(step, total) << "checkpoint " << k;
    EXPECT_LE(step, highest_version) << "checkpoint " << k;
  }
  pushers.Stop();
  for (const auto& s : pushers.results()) ASSERT_OK(s);
  const absl::Status no_lease = client::PsAdmin(&clients_[0]->control()).HoldPushes(absl::ZeroDuration()).status();
  EXPECT_EQ(no_lease.code(), absl::StatusCode::kInvalidArgument) << no_lease;
  EXPECT_THAT(std::string(no_lease.message()), ::testing::HasSubstr("lease of 1 ms or more"));
  // The holds were all released: pushes go on.
  const std::vector<float> zeros(total_, 0.0f);
  std::vector<float> params(total_);
  ASSERT_OK(clients_[0]->PushPullAll(zeros.data(), params.data(), offsets_).status());
}

// The same over gRPC streams (frames over TCP off, as with TLS), with eight
// replicas pushing: pushes that meet a hold wait off gRPC's threads, so
// the PS still serves the save that releases the hold (and other calls) at
// once, not when the hold's lease ends (were they all taken, as they were
// here before, each checkpoint took the whole lease).
TEST_F(PsConsistencyTest, AHoldOverGrpcStreamsLeavesThePsServingCalls) {
  constexpr int kClients = 8, kCheckpoints = 4;
  constexpr absl::Duration kLease = absl::Seconds(20);
  Start("async", kClients, 0, "", {}, 512 << 20, /*tcp_frames=*/false);
  ASSERT_FALSE(clients_[0]->frames_over_tcp(0));
  Pushers pushers(this);
  const std::string dir = testing::TempDir() + "/held_over_grpc";
  for (int k = 1; k <= kCheckpoints; ++k) {
    const int64_t before = pushers.rounds();
    for (int wait = 0; wait < 3000 && pushers.rounds() < before + 20; ++wait) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_GE(pushers.rounds(), before + 20) << "the replicas stopped pushing";
    const absl::Time start = absl::Now();
    ASSERT_OK(client::PsAdmin(&clients_[0]->control()).HoldPushes(kLease).status()) << "checkpoint " << k;
    // The replicas' next pushes now wait on the hold.
    absl::SleepFor(absl::Milliseconds(200));
    ASSERT_OK(clients_[0]->Stats().status());
    const absl::Time save_start = absl::Now();
    ASSERT_OK(
        client::PsAdmin(&clients_[0]->control()).SaveCheckpoint(dir, k, absl::Seconds(60), /*release_hold=*/true).status());
    const absl::Duration took = absl::Now() - start;
    std::printf("checkpoint %d over gRPC streams, %d replicas held: saved in %.3f s\n", k, kClients,
                absl::ToDoubleSeconds(absl::Now() - save_start));
    EXPECT_LT(took, absl::Seconds(5))
        << "checkpoint " << k << " took " << took << "; the hold's lease is " << kLease;
  }
  pushers.Stop();
  for (const auto& s : pushers.results()) ASSERT_OK(s);
}

TEST_F(PsConsistencyTest, AsyncPushThenPullAnswersWithTheNewValues) {
  Start("async", 1);
  std::vector<float> g(total_), pulled(total_);
  for (int64_t i = 0; i < total_; ++i) g[i] = 0.25f * static_cast<float>(i % 4);
  for (int round = 1; round <= 3; ++round) {
    ASSERT_OK_AND_ASSIGN(int64_t step, clients_[0]->PushPullAll(g.data(), pulled.data(), offsets_));
    EXPECT_EQ(step, round);
    for (int64_t i = 0; i < total_; ++i) {
      ASSERT_EQ(pulled[i], init_[i] - round * g[i]) << "round " << round << " element " << i;
    }
  }
  std::vector<float> seen(total_);
  ASSERT_OK(clients_[0]->PullAll(seen.data(), offsets_).status());
  EXPECT_EQ(seen, pulled);

  // A raw push-then-pull of one slice of w with an infinity at its end: an
  // error, and nothing stored moves.
  const SliceDef w = placement_.SlicesOf("w")[1];
  auto channel =
      grpc::CreateChannel(ps_->addresses()[w.ps].ToString(), grpc::InsecureChannelCredentials());
  client::PsStream stream(channel, "ps:w");
  std::vector<float> bad(w.elements(), 1.0f);
  bad.back() = -INFINITY;
  v1::FrameHeader h;
  v1::TensorRef* r = h.add_push();
  r->set_key(w.key());
  r->set_bytes(w.bytes());
  h.add_pull()->set_key(w.key());
  absl::Status s = stream.Call(
      h, {grpc::Slice(std::string(reinterpret_cast<const char*>(bad.data()), bad.size() * 4))},
      absl::Seconds(10), [](const DecodedFrame&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            absl::StrCat("ps:w: Exchange: gradient for ", w.key(),
                         " has a non-finite value (-inf) at element ", w.elements() - 1));
  ASSERT_OK(clients_[0]->PullAll(seen.data(), offsets_).status());
  EXPECT_EQ(seen, pulled);
}

TEST_F(PsConsistencyTest, HybridJobTrainsDenseSyncAndEmbeddingsAsync) {
  Start("sync", 2, 0, /*emb_mode=*/"async");
  std::vector<int64_t> ids = {3, 500, 999, 3};
  std::vector<float> rows(ids.size() * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", ids, rows.data()));
  EXPECT_EQ(std::vector<float>(rows.begin(), rows.begin() + 8),
            std::vector<float>(rows.begin() + 24, rows.end()));  // id 3 twice
  // Replica 0 alone: its embedding push applies at once while the dense
  // variables wait for replica 1.
  std::vector<float> grads(ids.size() * 8, 0.25f);
  ASSERT_OK(clients_[0]->PushRows("emb", ids, grads.data()));
  std::vector<float> after(ids.size() * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", ids, after.data()));
  for (int j = 0; j < 8; ++j) {
    EXPECT_FLOAT_EQ(after[j], rows[j] - 0.5f);  // id 3: two rows of 0.25
    EXPECT_FLOAT_EQ(after[8 + j], rows[8 + j] - 0.25f);
  }
  auto stats = clients_[0]->Stats();
  ASSERT_OK(stats.status());
  for (const auto& s : *stats) {
    for (const auto& sl : s.slices()) {
      EXPECT_EQ(sl.consistency(), sl.variable() == "emb" ? "async" : "sync") << sl.key();
    }
  }
  auto bad = clients_[0]->PullRows("emb", std::vector<int64_t>{1000}, after.data());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("id 1000 is out of range [0, 1000) for table emb"),
            absl::string_view::npos)
      << bad;
}

// PushPullRows: each PS applies the frame's row gradients, then answers its
// pull from the new values; ids may differ between the two and span both
// PS. A bad id in the pull refuses that PS's frame before its push changes
// anything there.
TEST_F(PsConsistencyTest, AsyncRowsPushThenPullInOneExchange) {
  Start("async", 1);
  const std::vector<int64_t> all = {3, 7, 500, 999};
  std::vector<float> before(all.size() * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", all, before.data()));
  const std::vector<int64_t> pushed = {3, 500, 3};
  std::vector<float> grads(pushed.size() * 8, 0.25f);
  const std::vector<int64_t> pulled = {999, 3, 7, 500};
  std::vector<float> got(pulled.size() * 8, -1.0f);
  std::vector<PsClient::TableRows> push = {{"emb", pushed, nullptr, grads.data()}};
  std::vector<PsClient::TableRows> pull = {{"emb", pulled, got.data(), nullptr}};
  ASSERT_OK(clients_[0]->PushPullRows(push, pull));
  for (int j = 0; j < 8; ++j) {
    EXPECT_FLOAT_EQ(got[j], before[24 + j]);               // 999: not pushed
    EXPECT_FLOAT_EQ(got[8 + j], before[j] - 0.5f);         // 3: two rows of 0.25
    EXPECT_FLOAT_EQ(got[16 + j], before[8 + j]);           // 7: not pushed
    EXPECT_FLOAT_EQ(got[24 + j], before[16 + j] - 0.25f);  // 500
  }

  // A bad pull id (1000) refuses the frame to its PS, push and all; the
  // other PS's frame stands on its own.
  const int bad_ps = EmbeddingOwner(1000, 2);
  int64_t same = 0, other = 0;
  while (EmbeddingOwner(same, 2) != bad_ps) ++same;
  while (EmbeddingOwner(other, 2) == bad_ps) ++other;
  const std::vector<int64_t> two = {same, other};
  std::vector<float> two_before(2 * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", two, two_before.data()));
  std::vector<float> two_grads(2 * 8, 0.25f);
  const std::vector<int64_t> bad_ids = {1000};
  std::vector<float> out(8);
  push = {{"emb", two, nullptr, two_grads.data()}};
  pull = {{"emb", bad_ids, out.data(), nullptr}};
  absl::Status bad = clients_[0]->PushPullRows(push, pull);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("id 1000 is out of range [0, 1000) for table emb"),
            absl::string_view::npos)
      << bad;
  std::vector<float> two_after(2 * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", two, two_after.data()));
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(two_after[j], two_before[j]) << "id " << same;
    EXPECT_FLOAT_EQ(two_after[8 + j], two_before[8 + j] - 0.25f) << "id " << other;
  }
}

// A sync table: each round sums every replica's row gradients and applies
// their mean once per row, on each PS, even where a replica's batch named
// no row there (its push to that PS is empty but still counts).
TEST_F(PsConsistencyTest, SyncTablesApplyTheReplicasRowsOncePerRound) {
  Start("sync", 2, 0, /*emb_mode=*/"sync");
  int64_t on[2] = {-1, -1};  // an id owned by ps:0, and one by ps:1
  for (int64_t id = 0; on[0] < 0 || on[1] < 0; ++id) {
    if (on[EmbeddingOwner(id, 2)] < 0) on[EmbeddingOwner(id, 2)] = id;
  }
  const std::vector<int64_t> both = {on[0], on[1]};
  std::vector<float> before(2 * 8);
  ASSERT_OK(clients_[0]->PullRows("emb", both, before.data()));
  for (int round = 1; round <= 2; ++round) {
    // Replica 0 names only ps:0's row; replica 1 both rows.
    const std::vector<int64_t> first = {on[0]};
    const std::vector<float> g0(8, 1.0f), g1(16, 3.0f);
    const std::vector<client::PsClient::TableRows> push0 = {{"emb", first, nullptr, g0.data()}};
    const std::vector<client::PsClient::TableRows> push1 = {{"emb", both, nullptr, g1.data()}};
    ASSERT_OK(clients_[0]->PushRows(push0));
    ASSERT_OK(clients_[1]->PushRows(push1));
    // Each replica's pull waits for the round; then (sgd, lr 1) ps:0's row
    // moved by (1 + 3) / 2 per round, ps:1's by 3 / 2.
    for (int r : {0, 1}) {
      std::vector<float> after(2 * 8);
      ASSERT_OK(clients_[r]->PullRows("emb", both, after.data()));
      for (int j = 0; j < 8; ++j) {
        EXPECT_FLOAT_EQ(after[j], before[j] - 2.0f * round) << "round " << round;
        EXPECT_FLOAT_EQ(after[8 + j], before[8 + j] - 1.5f * round) << "round " << round;
      }
    }
  }
  EXPECT_EQ(clients_[0]->dropped_pushes(), 0);
  ASSERT_OK_AND_ASSIGN(auto stats, clients_[0]->Stats());
  for (const auto& s : stats) {
    for (const auto& sl : s.slices()) {
      if (sl.variable() == "emb") {
        EXPECT_EQ(sl.consistency(), "sync");
      }
    }
  }
}

TEST_F(PsConsistencyTest, BadRequestsGetAStatusNamingTheProblemAndChangeNothing) {
  Start("async", 1, 0, "", {}, /*max_message_bytes=*/1 << 20);
  // A pushing client that believes the job is sync.
  client::PsClientOptions o;
  o.ps_addresses = ps_->addresses();
  o.consistency = Consistency::Sync();
  ASSERT_OK_AND_ASSIGN(auto wrong_mode, client::PsClient::Create(o, placement_));
  const std::vector<float> g = GradOf(0);
  absl::Status s = wrong_mode->PushAll(g.data(), offsets_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("push is for a sync job but this job runs async"),
            absl::string_view::npos)
      << s;

  // Raw frames: a wrong byte length, a NaN, a message over the size limit.
  const SliceDef b = placement_.SlicesOf("b")[0];
  auto channel =
      grpc::CreateChannel(ps_->addresses()[b.ps].ToString(), grpc::InsecureChannelCredentials());
  client::PsStream stream(channel, "ps:b");
  auto push_b = [&](const std::string& bytes, int64_t declared) {
    v1::FrameHeader h;
    v1::TensorRef* r = h.add_push();
    r->set_key(b.key());
    r->set_bytes(declared);
    return stream.Call(h, {grpc::Slice(bytes)}, absl::Seconds(10),
                       [](const DecodedFrame&) { return absl::OkStatus(); });
  };
  v1::FrameHeader unknown;
  unknown.add_push()->set_key("extra/part_0");
  s = stream.Call(unknown, {grpc::Slice(std::string(16, '\0'))}, absl::Seconds(10),
                  [](const DecodedFrame&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            absl::StrCat("ps:b: Exchange: ps:", b.ps, " holds no tensor \"extra/part_0\""));
  s = push_b(std::string(36, '\0'), 36);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ps:b: Exchange: gradient for b/part_0 has 36 bytes, expected 40");
  std::vector<float> nan_grad(10, 1.0f);
  nan_grad[7] = INFINITY;
  s = push_b(std::string(reinterpret_cast<const char*>(nan_grad.data()), 40), 40);
  EXPECT_EQ(s.message(),
            "ps:b: Exchange: gradient for b/part_0 has a non-finite value (inf) at element 7");
  s = push_b(std::string(2 << 20, '\0'), 2 << 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("larger than max"), absl::string_view::npos) << s;

  // Nothing moved.
  std::vector<float> params(total_);
  ASSERT_OK_AND_ASSIGN(int64_t step, clients_[0]->PullAll(params.data(), offsets_));
  EXPECT_EQ(step, 0);
  EXPECT_EQ(params, init_);
}

}  // namespace
}  // namespace pstrain
