// The PS's frame port against raw clients that break the rules, and a real
// PsClient that keeps them: refusals are said and the connection closed,
// and nothing a refused connection sent reaches the store.
#include "ps_server/frame_server.h"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "transport/frame_socket.h"
#include "transport/security.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"

namespace pstrain::ps {
namespace {

constexpr char kToken[] = "frame-server-test-token-0123456789";

class FrameServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SecurityConfig config;
    config.token = kToken;
    ASSERT_OK_AND_ASSIGN(security_, Security::Load(config));
    PsServiceOptions options;
    options.security = security_;
    ASSERT_OK_AND_ASSIGN(ps_, testing::LocalPs::Start(1, options, max_message_bytes_));
    ASSERT_GT(ps_->frame_port(0), 0);
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement({{"w", {elements_}}}, 1, PlacementOptions()));
    client::PsClientOptions o;
    o.ps_addresses = ps_->addresses();
    o.security = security_;
    o.rpc_deadline = absl::Seconds(5);
    ASSERT_OK_AND_ASSIGN(client_, client::PsClient::Create(o, placement_));
    client::CreateOptions create;
    create.optimizer = {"sgd", 1.0f};
    ASSERT_OK(client::PsAdmin(&client_->control())
                  .CreateVariables(placement_, std::vector<float>(elements_, 2.0f), {0}, create)
                  .status());
  }

  std::unique_ptr<FrameSocket> Connect() {
    auto s = FrameSocket::Connect("127.0.0.1", ps_->frame_port(0), absl::Seconds(5));
    EXPECT_OK(s.status());
    (*s)->SetTimeout(absl::Seconds(10));
    return *std::move(s);
  }

  static grpc::ByteBuffer Hello(const std::string& token) {
    v1::FrameHeader h;
    h.set_tcp_hello(true);
    h.set_tcp_token(token);
    return EncodeFrame(h, {});
  }

  // A push of `grads` (all of "w") pulling it back, or a push alone.
  static grpc::ByteBuffer PushPull(const std::vector<float>& grads, bool pull = true,
                                   uint64_t request_id = 9) {
    v1::FrameHeader h;
    h.set_request_id(request_id);
    v1::TensorRef* r = h.add_push();
    r->set_key("w/part_0");
    r->set_bytes(grads.size() * 4);
    if (pull) h.add_pull()->set_key("w/part_0");
    return EncodeFrame(h, {BorrowSlice(grads.data(), grads.size() * 4)});
  }

  DecodedFrame ReadFrame(FrameSocket& s) {
    DecodedFrame f;
    auto in = s.Read(*pool_, max_message_bytes_);
    EXPECT_OK(in.status());
    if (in.ok()) {
      EXPECT_OK(f.Parse(*in));
    }
    return f;
  }

  // The store's values of "w", pulled by the well-behaved client.
  std::vector<float> Values() {
    std::vector<float> v(elements_);
    EXPECT_OK(client_->PullAll(v.data(), {0}).status());
    return v;
  }

  int64_t elements_ = 64;  // of "w"
  int max_message_bytes_ = 1 << 20;
  std::shared_ptr<const Security> security_;
  std::unique_ptr<testing::LocalPs> ps_;
  Placement placement_;
  std::unique_ptr<client::PsClient> client_;
  std::shared_ptr<BufferPool> pool_ = BufferPool::Create();
};

TEST_F(FrameServerTest, AHelloWithTheTokenOpensAConnectionThatPushesAndPulls) {
  auto s = Connect();
  ASSERT_OK(s->Write(Hello(kToken)));
  DecodedFrame hello = ReadFrame(*s);
  EXPECT_EQ(hello.header().code(), 0);
  EXPECT_TRUE(hello.header().tcp_hello());
  std::vector<float> grads(64, 0.5f);
  ASSERT_OK(s->Write(PushPull(grads)));
  DecodedFrame answer = ReadFrame(*s);
  EXPECT_EQ(answer.header().code(), 0) << answer.header().message();
  EXPECT_EQ(answer.header().request_id(), 9u);
  ASSERT_EQ(answer.payload_size(), 64 * 4);
  std::vector<float> back(64);
  answer.CopyPayload(0, 64 * 4, back.data());
  EXPECT_EQ(back, std::vector<float>(64, 1.5f));
  EXPECT_EQ(Values(), std::vector<float>(64, 1.5f));
  // The real client's frames went over TCP too.
  EXPECT_TRUE(client_->frames_over_tcp(0));
}

TEST_F(FrameServerTest, AWrongTokenIsRefusedAndItsFramesChangeNothing) {
  auto s = Connect();
  ASSERT_OK(s->Write(Hello("not-the-token-of-this-cluster")));
  std::vector<float> grads(64, 0.5f);
  // Sent at once, before the refusal is read: it must not be applied.
  (void)s->Write(PushPull(grads));
  DecodedFrame refusal = ReadFrame(*s);
  EXPECT_EQ(refusal.header().code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(refusal.header().message(), "the call's cluster token is wrong");
  // Closed (reset, as the unread push was dropped).
  EXPECT_FALSE(s->Read(*pool_, 1 << 20).ok());
  EXPECT_EQ(Values(), std::vector<float>(64, 2.0f));
}

TEST_F(FrameServerTest, AFirstFrameThatIsNoHelloIsRefused) {
  auto s = Connect();
  std::vector<float> grads(64, 0.5f);
  ASSERT_OK(s->Write(PushPull(grads)));
  DecodedFrame refusal = ReadFrame(*s);
  EXPECT_EQ(refusal.header().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(refusal.header().message(), "the connection's first frame is not a hello");
  EXPECT_EQ(s->Read(*pool_, 1 << 20).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Values(), std::vector<float>(64, 2.0f));
}

TEST_F(FrameServerTest, AFrameOverTheSizeLimitClosesOnlyItsConnection) {
  auto s = Connect();
  ASSERT_OK(s->Write(Hello(kToken)));
  EXPECT_EQ(ReadFrame(*s).header().code(), 0);
  // 2 MiB against the PS's 1 MiB message limit.
  std::string big(2 << 20, '\0');
  grpc::Slice slice(big.data(), big.size());
  (void)s->Write(grpc::ByteBuffer(&slice, 1));
  EXPECT_FALSE(s->Read(*pool_, 1 << 20).ok());
  // The store is untouched and still serves.
  EXPECT_EQ(Values(), std::vector<float>(64, 2.0f));
  std::vector<float> grads(64, 1.0f), params(64);
  ASSERT_OK(client_->PushPullAll(grads.data(), params.data(), {0}).status());
  EXPECT_EQ(params, std::vector<float>(64, 1.0f));
}

TEST_F(FrameServerTest, ABadFrameIsAnsweredWithAnErrorAndTheConnectionGoesOn) {
  auto s = Connect();
  ASSERT_OK(s->Write(Hello(kToken)));
  EXPECT_EQ(ReadFrame(*s).header().code(), 0);
  std::string garbage = "\xff\xff\xff not a frame";
  grpc::Slice slice(garbage.data(), garbage.size());
  ASSERT_OK(s->Write(grpc::ByteBuffer(&slice, 1)));
  DecodedFrame error = ReadFrame(*s);
  EXPECT_EQ(error.header().code(), static_cast<int>(absl::StatusCode::kDataLoss));
  std::vector<float> grads(64, 0.5f);
  ASSERT_OK(s->Write(PushPull(grads)));
  EXPECT_EQ(ReadFrame(*s).header().code(), 0);
  EXPECT_EQ(Values(), std::vector<float>(64, 1.5f));
}

// Frames of 5 MiB (the socket reads them without the low-water mark):
// applied whole with or without a pull, and refused whole, naming the
// element, when any value is NaN or Inf.
class LargeFrameServerTest : public FrameServerTest {
 protected:
  LargeFrameServerTest() {
    elements_ = (5 << 20) / 4;
    max_message_bytes_ = 16 << 20;
  }

  // Gradients exact in float, so 2 - k * g is exact too.
  std::vector<float> Grads() const {
    std::vector<float> g(elements_);
    for (int64_t i = 0; i < elements_; ++i) g[i] = 0.25f * static_cast<float>(i % 7);
    return g;
  }

  std::unique_ptr<FrameSocket> Open() {
    auto s = Connect();
    EXPECT_OK(s->Write(Hello(kToken)));
    EXPECT_EQ(ReadFrame(*s).header().code(), 0);
    return s;
  }
};

TEST_F(LargeFrameServerTest, AFiniteGradientIsAppliedWithOrWithoutAPull) {
  auto s = Open();
  const std::vector<float> g = Grads();
  ASSERT_OK(s->Write(PushPull(g, /*pull=*/true)));
  DecodedFrame answer = ReadFrame(*s);
  ASSERT_EQ(answer.header().code(), 0) << answer.header().message();
  ASSERT_EQ(answer.payload_size(), elements_ * 4);
  std::vector<float> back(elements_), want(elements_);
  answer.CopyPayload(0, elements_ * 4, back.data());
  for (int64_t i = 0; i < elements_; ++i) want[i] = 2.0f - g[i];
  EXPECT_EQ(back, want);
  // A push alone takes the store's other path (no answer in the frame).
  ASSERT_OK(s->Write(PushPull(g, /*pull=*/false)));
  ASSERT_EQ(ReadFrame(*s).header().code(), 0);
  for (int64_t i = 0; i < elements_; ++i) want[i] = 2.0f - 2.0f * g[i];
  EXPECT_EQ(Values(), want);
  EXPECT_EQ(ps_->store(0).global_step(), 2);  // each push applied once
}

TEST_F(LargeFrameServerTest, ANonFiniteValueAnywhereIsRefusedAndNothingIsApplied) {
  auto s = Open();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<int64_t, float>> bad = {
      {0, nan}, {elements_ / 2, -inf}, {elements_ - 1, inf}};
  for (bool pull : {true, false}) {
    for (const auto& [at, value] : bad) {
      std::vector<float> g = Grads();
      g[at] = value;
      ASSERT_OK(s->Write(PushPull(g, pull)));
      DecodedFrame refusal = ReadFrame(*s);
      EXPECT_EQ(refusal.header().code(), static_cast<int>(absl::StatusCode::kInvalidArgument))
          << "element " << at;
      EXPECT_EQ(refusal.header().message(),
                absl::StrCat("gradient for w/part_0 has a non-finite value (", value,
                             ") at element ", at));
    }
  }
  EXPECT_EQ(Values(), std::vector<float>(elements_, 2.0f));
  EXPECT_EQ(ps_->store(0).global_step(), 0);
}

}  // namespace
}  // namespace pstrain::ps
