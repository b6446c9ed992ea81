// PsClient against a real PS service on 127.0.0.1:0.
#include "client/ps_admin.h"
#include "client/ps_client.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "transport/grpc_server.h"
#include "base/subprocess.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain::client {
namespace {

// Two real PS servers, each with its own store.
class PsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(ps_, ps::testing::LocalPs::Start(2));
    addresses_ = ps_->addresses();
    // A large variable split across both PS and two small ones.
    variables_ = {{"big", {1000, 200}}, {"small", {10}}, {"tiny", {3, 2}}};
    PlacementOptions popts;
    popts.min_slice_bytes = 64 * 1024;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement(variables_, 2, popts));
    int64_t off = 0;
    for (const VariableDef& v : variables_) {
      offsets_.push_back(off);
      off += v.elements();
    }
    total_ = off;
    PsClientOptions options;
    options.ps_addresses = addresses_;
    options.rpc_deadline = absl::Seconds(5);
    // Small frames: every slice here travels in frames of its own or with
    // the small ones, as a large model's would.
    options.max_frame_bytes = 64 * 1024;
    ASSERT_OK_AND_ASSIGN(client_, PsClient::Create(options, placement_));
  }

  static CreateOptions Sgd(float lr) {
    CreateOptions c;
    c.optimizer = {"sgd", lr};
    return c;
  }

  std::unique_ptr<ps::testing::LocalPs> ps_;
  std::vector<HostPort> addresses_;
  std::vector<VariableDef> variables_;
  Placement placement_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsClientTest, PushPullOfSomeVariablesTouchesOnlyTheirSlices) {
  ASSERT_OK(client_->WaitUntilReady(absl::Seconds(5), false));
  std::vector<float> init(total_, 1.0f);
  ASSERT_OK(PsAdmin(&client_->control()).CreateVariables(placement_, init, offsets_, Sgd(0.5f)).status());
  std::vector<float> grads(total_, 2.0f), params(total_, -7.0f);
  // "big" (split over both PS) and "tiny": pushed and pulled; "small" not.
  ASSERT_OK(client_->PushPullVariables({0, 2}, grads.data(), params.data(), offsets_).status());
  for (int64_t i = 0; i < total_; ++i) {
    const bool small = i >= offsets_[1] && i < offsets_[2];
    ASSERT_FLOAT_EQ(params[i], small ? -7.0f : 0.0f) << i;  // 1 - 0.5 * 2
  }
  std::vector<float> all(total_);
  ASSERT_OK(client_->PullAll(all.data(), offsets_).status());
  for (int64_t i = offsets_[1]; i < offsets_[2]; ++i) ASSERT_FLOAT_EQ(all[i], 1.0f) << i;
  EXPECT_EQ(
      client_->PushPullVariables({3}, grads.data(), params.data(), offsets_).status().message(),
      "variable index 3 is out of range: the model has 3 variables");
  // A NaN in a multi-frame push is refused before any frame goes out.
  grads[offsets_[0] + 5] = std::nanf("");
  EXPECT_EQ(client_->PushPullVariables({0}, grads.data(), params.data(), offsets_).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(client_->PullAll(all.data(), offsets_).status());
  EXPECT_FLOAT_EQ(all[offsets_[0]], 0.0f);
}

TEST_F(PsClientTest, CreatePullPushRoundTripsAcrossSlices) {
  ASSERT_EQ(placement_.SlicesOf("big").size(), 2u);
  ASSERT_OK(client_->WaitUntilReady(absl::Seconds(5), false));
  std::vector<float> init(total_);
  for (int64_t i = 0; i < total_; ++i) init[i] = 0.001f * i;
  ASSERT_OK_AND_ASSIGN(int kept, PsAdmin(&client_->control()).CreateVariables(placement_, init, offsets_, Sgd(0.5f)));
  EXPECT_EQ(kept, 0);
  ASSERT_OK(client_->WaitUntilReady(absl::Seconds(5), true));

  std::vector<float> pulled(total_, -1);
  ASSERT_OK_AND_ASSIGN(int64_t step, client_->PullAll(pulled.data(), offsets_));
  EXPECT_EQ(step, 0);
  EXPECT_EQ(pulled, init);

  std::vector<float> grads(total_);
  for (int64_t i = 0; i < total_; ++i) grads[i] = 2.0f;
  ASSERT_OK(client_->PushAll(grads.data(), offsets_));
  ASSERT_OK_AND_ASSIGN(step, client_->PullAll(pulled.data(), offsets_));
  EXPECT_EQ(step, 1);
  for (int64_t i = 0; i < total_; ++i) ASSERT_FLOAT_EQ(pulled[i], init[i] - 1.0f) << i;

  // A second CreateVariables keeps the trained values.
  ASSERT_OK_AND_ASSIGN(kept, PsAdmin(&client_->control()).CreateVariables(placement_, init, offsets_, Sgd(0.5f)));
  EXPECT_EQ(kept, 2);
  ASSERT_OK(client_->PullAll(pulled.data(), offsets_).status());
  EXPECT_FLOAT_EQ(pulled[5], init[5] - 1.0f);

  ASSERT_OK_AND_ASSIGN(auto stats, client_->Stats());
  ASSERT_EQ(stats.size(), 2u);
  int64_t bytes = 0;
  for (const auto& s : stats) {
    for (const auto& sl : s.slices()) {
      bytes += sl.bytes();
      EXPECT_EQ(sl.pushes(), 1);
    }
  }
  EXPECT_EQ(bytes, total_ * 4);
}

TEST_F(PsClientTest, FramesOverTcpAndInGrpcCarryTheSameValues) {
  ASSERT_OK(client_->WaitUntilReady(absl::Seconds(5), false));
  std::vector<float> init(total_);
  for (int64_t i = 0; i < total_; ++i) init[i] = 0.25f * (i % 17);
  ASSERT_OK(PsAdmin(&client_->control()).CreateVariables(placement_, init, offsets_, Sgd(0.5f)).status());
  PsClientOptions options;
  options.ps_addresses = addresses_;
  options.max_frame_bytes = 64 * 1024;
  options.tcp_frames = false;
  ASSERT_OK_AND_ASSIGN(auto grpc_only, PsClient::Create(options, placement_));
  std::vector<float> grads(total_), over_tcp(total_), in_grpc(total_);
  for (int64_t i = 0; i < total_; ++i) grads[i] = 0.01f * (i % 5);
  // Two steps each way, alternating: each sees the other's update.
  for (int step = 0; step < 2; ++step) {
    ASSERT_OK(client_->PushPullAll(grads.data(), over_tcp.data(), offsets_).status());
    ASSERT_OK(grpc_only->PushPullAll(grads.data(), in_grpc.data(), offsets_).status());
  }
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_TRUE(client_->frames_over_tcp(ps)) << ps;
    EXPECT_FALSE(grpc_only->frames_over_tcp(ps)) << ps;
  }
  ASSERT_OK(client_->PullAll(over_tcp.data(), offsets_).status());
  for (int64_t i = 0; i < total_; ++i) {
    ASSERT_FLOAT_EQ(in_grpc[i], init[i] - 0.5f * 4 * grads[i]) << i;
    ASSERT_FLOAT_EQ(over_tcp[i], in_grpc[i]) << i;
  }
}

// Three clients on the same two PS, alternating pushes: one lane, three
// lanes over TCP, and three lanes with shared memory. Each round's frames
// to a PS are spread over a lane per 384 KiB; every client sees the
// others' updates, and the values are as one client's would be.
TEST_F(PsClientTest, LanesSpreadARoundOverConnectionsWithTheSameValues) {
  // Each PS: 800 KB of "a", 200 KB of "b"; ps:0 also "small". About 1 MB
  // each: two lanes, "a" on one, the rest on the other.
  const std::vector<VariableDef> variables = {
      {"a", {1000, 400}}, {"b", {1000, 100}}, {"small", {10}}};
  PlacementOptions popts;
  popts.min_slice_bytes = 64 * 1024;
  ASSERT_OK_AND_ASSIGN(Placement placement, ComputePlacement(variables, 2, popts));
  ASSERT_EQ(placement.SlicesOf("a").size(), 2u);
  ASSERT_EQ(placement.SlicesOf("b").size(), 2u);
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const VariableDef& v : variables) {
    offsets.push_back(total);
    total += v.elements();
  }
  PsClientOptions options;
  options.ps_addresses = addresses_;
  options.max_frame_bytes = 64 * 1024;
  options.lanes = 1;
  ASSERT_OK_AND_ASSIGN(auto one_lane, PsClient::Create(options, placement));
  ASSERT_OK(one_lane->WaitUntilReady(absl::Seconds(5), false));
  std::vector<float> init(total);
  for (int64_t i = 0; i < total; ++i) init[i] = 0.5f * (i % 13);
  ASSERT_OK(PsAdmin(&one_lane->control()).CreateVariables(placement, init, offsets, Sgd(0.25f)).status());
  options.lanes = 3;
  ASSERT_OK_AND_ASSIGN(auto three_lanes, PsClient::Create(options, placement));
  options.shared_memory = true;
  ASSERT_OK_AND_ASSIGN(auto shared, PsClient::Create(options, placement));
  options.lanes = 0;
  EXPECT_EQ(PsClient::Create(options, placement).status().message(),
            "a PS client needs at least 1 lane per ps, got 0");

  std::vector<float> grads(total), params(total);
  for (int64_t i = 0; i < total; ++i) grads[i] = 0.125f * (i % 7);
  constexpr int kRounds = 4;
  int64_t shared_before = 0;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_OK(one_lane->PushPullAll(grads.data(), params.data(), offsets).status());
    ASSERT_OK(three_lanes->PushPullAll(grads.data(), params.data(), offsets).status());
    if (round == kRounds - 1) shared_before = shared->SharedMemoryFrames();
    ASSERT_OK(shared->PushPullAll(grads.data(), params.data(), offsets).status());
  }
  for (int64_t i = 0; i < total; ++i) {
    ASSERT_FLOAT_EQ(params[i], init[i] - 0.25f * 3 * kRounds * grads[i]) << i;
  }
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_TRUE(one_lane->frames_over_tcp(ps, 0)) << ps;
    // Two lanes' worth of bytes: the third lane has nothing to carry.
    EXPECT_TRUE(three_lanes->frames_over_tcp(ps, 0)) << ps;
    EXPECT_TRUE(three_lanes->frames_over_tcp(ps, 1)) << ps;
    EXPECT_FALSE(three_lanes->frames_over_tcp(ps, 2)) << ps;
  }
  // Once the PS have mapped the region (the first round may go out before
  // they answer the offer, over lanes), a round goes through it whole, on
  // each PS's first stream, the only one with a region: a frame per slice
  // (each is over max_frame_bytes but "small"), five in all.
  EXPECT_EQ(shared->SharedMemoryFrames() - shared_before, 5);

  // Under 768 KiB a PS, one lane: the same rounds in bfloat16, 0.5 MB.
  options.lanes = 3;
  options.shared_memory = false;
  options.bfloat16_wire = true;
  ASSERT_OK_AND_ASSIGN(auto narrow, PsClient::Create(options, placement));
  ASSERT_OK(narrow->PushPullAll(grads.data(), params.data(), offsets).status());
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_TRUE(narrow->frames_over_tcp(ps, 0)) << ps;
    EXPECT_FALSE(narrow->frames_over_tcp(ps, 1)) << ps;
  }
}

TEST_F(PsClientTest, PullBeforeInitialisationNamesThePs) {
  std::vector<float> pulled(total_);
  auto r = client_->PullAll(pulled.data(), offsets_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("ps:0 (127.0.0.1:"), absl::string_view::npos) << r.status();
  EXPECT_NE(r.status().message().find("Exchange: ps:0 has no variables yet"),
            absl::string_view::npos)
      << r.status();
}

TEST_F(PsClientTest, NonFiniteGradientIsRejectedOverTheWireAndChangesNothing) {
  std::vector<float> init(total_, 1.0f);
  ASSERT_OK(PsAdmin(&client_->control()).CreateVariables(placement_, init, offsets_, Sgd(1.0f)).status());
  std::vector<float> grads(total_, 0.5f);
  grads[offsets_[1] + 3] = std::nanf("");
  absl::Status s = client_->PushAll(grads.data(), offsets_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gradient for small/part_0 has a non-finite value (nan) at element 3"),
            absl::string_view::npos)
      << s;
  std::vector<float> pulled(total_);
  ASSERT_OK(client_->PullAll(pulled.data(), offsets_).status());
  const int bad_ps = placement_.SlicesOf("small")[0].ps;
  for (const SliceDef& sl : placement_.SlicesOn(bad_ps)) {
    int v = sl.variable == "big" ? 0 : sl.variable == "small" ? 1 : 2;
    EXPECT_EQ(pulled[offsets_[v] + sl.element_offset()], 1.0f) << sl.key();
  }
}

TEST_F(PsClientTest, MissingPsIsNamedWhenWaiting) {
  PsClientOptions options;
  ASSERT_OK_AND_ASSIGN(std::vector<int> ports, PickFreePorts(1));
  options.ps_addresses = {addresses_[0], {"127.0.0.1", ports[0]}};
  ASSERT_OK_AND_ASSIGN(auto client, PsClient::Create(options, placement_));
  absl::Status s = client->WaitUntilReady(absl::Milliseconds(600), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find(absl::StrCat("ps:1 (127.0.0.1:", ports[0], "): not answering")),
            absl::string_view::npos)
      << s;
  EXPECT_EQ(s.message().find("ps:0"), absl::string_view::npos) << s;
}

TEST_F(PsClientTest, ShutdownStopsEveryServer) {
  ASSERT_OK(PsAdmin(&client_->control()).ShutdownAll("test over"));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ps_->server(i).WaitForStopRequest(absl::Seconds(5)), "test over");
  }
}

}  // namespace
}  // namespace pstrain::client
