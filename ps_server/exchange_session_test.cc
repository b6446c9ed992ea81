// ExchangeSession on a real store, without a transport: table ids carried
// in the payload (TensorRef.id_count) address the same rows as ids in the
// header, and frames whose ids do not add up are refused with nothing
// applied.
#include "ps_server/exchange_session.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain::ps {
namespace {

class ExchangeSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardStore::JobConfig job;
    job.optimizer = {"sgd", 1.0f};
    job.consistency = *ParseConsistency("async");
    job.num_replicas = 1;
    ASSERT_OK(store_.Initialize(job, {}, {{"emb", 100, 2, "", "zeros"}}).status());
  }

  // Handles `h` with `payload` and returns the answer.
  DecodedFrame Call(const v1::FrameHeader& h, std::vector<grpc::Slice> payload) {
    std::optional<grpc::ByteBuffer> answer;
    ExchangeSession session(&store_, BufferPool::Create(), ExchangeLimits(),
                            [&](grpc::ByteBuffer b) { answer = std::move(b); });
    session.Handle(EncodeFrame(h, std::move(payload)));
    DecodedFrame f;
    EXPECT_TRUE(answer.has_value());
    if (answer.has_value()) {
      EXPECT_OK(f.Parse(*answer));
    }
    return f;
  }

  // Rows `ids` of "emb", pulled with header ids.
  std::vector<float> Rows(const std::vector<int64_t>& ids) {
    v1::FrameHeader h;
    v1::TensorRef* r = h.add_pull();
    r->set_key("emb");
    for (int64_t id : ids) r->add_ids(id);
    DecodedFrame f = Call(h, {});
    EXPECT_EQ(f.header().code(), 0) << f.header().message();
    std::vector<float> v(f.payload_size() / 4);
    f.CopyPayload(0, f.payload_size(), v.data());
    return v;
  }

  ShardStore store_{0, 1};
};

grpc::Slice Bytes(const void* data, size_t n) { return grpc::Slice(data, n); }

TEST_F(ExchangeSessionTest, IdsInThePayloadAddressTheSameRowsAsIdsInTheHeader) {
  // Push rows 3 and 7 with the ids in the payload, the ids split across two
  // slices and the gradient in a third; then pull rows 7, 3, 5 the same way.
  const std::vector<int64_t> ids = {3, 7};
  const std::vector<float> grads = {1, 2, 3, 4};
  v1::FrameHeader push;
  v1::TensorRef* r = push.add_push();
  r->set_key("emb");
  r->set_id_count(2);
  r->set_bytes(16);
  DecodedFrame pushed =
      Call(push, {Bytes(ids.data(), 5), Bytes(reinterpret_cast<const char*>(ids.data()) + 5, 11),
                  Bytes(grads.data(), 16)});
  ASSERT_EQ(pushed.header().code(), 0) << pushed.header().message();
  EXPECT_EQ(Rows({3, 7, 5}), std::vector<float>({-1, -2, -3, -4, 0, 0}));

  const std::vector<int64_t> wanted = {7, 3, 5};
  v1::FrameHeader pull;
  r = pull.add_pull();
  r->set_key("emb");
  r->set_id_count(3);
  DecodedFrame f = Call(pull, {Bytes(wanted.data(), 24)});
  ASSERT_EQ(f.header().code(), 0) << f.header().message();
  std::vector<float> v(f.payload_size() / 4);
  f.CopyPayload(0, f.payload_size(), v.data());
  EXPECT_EQ(v, std::vector<float>({-3, -4, -1, -2, 0, 0}));
}

TEST_F(ExchangeSessionTest, PushThenPullWithIdsOfTwoRefsInThePayload) {
  // One frame pushes rows {1} and pulls rows {1, 2}: ids of the push ref,
  // then of the pull ref, then the gradient.
  const std::vector<int64_t> ids = {1, 1, 2};
  const std::vector<float> grads = {0.5f, 0.25f};
  v1::FrameHeader h;
  v1::TensorRef* r = h.add_push();
  r->set_key("emb");
  r->set_id_count(1);
  r->set_bytes(8);
  r = h.add_pull();
  r->set_key("emb");
  r->set_id_count(2);
  DecodedFrame f = Call(h, {Bytes(ids.data(), 24), Bytes(grads.data(), 8)});
  ASSERT_EQ(f.header().code(), 0) << f.header().message();
  std::vector<float> v(f.payload_size() / 4);
  f.CopyPayload(0, f.payload_size(), v.data());
  EXPECT_EQ(v, std::vector<float>({-0.5f, -0.25f, 0, 0}));
}

TEST_F(ExchangeSessionTest, IdsThatDoNotAddUpAreRefusedNamingTheTensorAndApplyNothing) {
  const std::vector<int64_t> ids = {3, 7};
  const std::vector<float> grads = {1, 2, 3, 4};
  struct Case {
    int64_t id_count;
    bool header_ids_too;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {100, false,
            "tensor 'emb' names 100 ids in the payload, but the payload holds 32 bytes (4 more "
            "ids at most)"},
           {5, false,
            "tensor 'emb' names 5 ids in the payload, but the payload holds 32 bytes (4 more "
            "ids at most)"},
           {-1, false, "tensor 'emb' names -1 ids in the payload, but a count cannot be negative"},
           {2, true, "tensor 'emb' carries ids both in its header and in the payload"},
       }) {
    v1::FrameHeader h;
    v1::TensorRef* r = h.add_push();
    r->set_key("emb");
    r->set_id_count(c.id_count);
    if (c.header_ids_too) r->add_ids(3);
    r->set_bytes(16);
    DecodedFrame f = Call(h, {Bytes(ids.data(), 16), Bytes(grads.data(), 16)});
    EXPECT_EQ(f.header().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(f.header().message(), c.message);
  }
  // A count that fits the payload but leaves the wrong number of gradient
  // bytes is the store's to refuse.
  v1::FrameHeader h;
  v1::TensorRef* r = h.add_push();
  r->set_key("emb");
  r->set_id_count(3);
  r->set_bytes(16);
  DecodedFrame f = Call(h, {Bytes(ids.data(), 16), Bytes(grads.data(), 16)});
  EXPECT_NE(f.header().code(), 0);
  EXPECT_EQ(Rows({3, 7}), std::vector<float>({0, 0, 0, 0}));
}

TEST_F(ExchangeSessionTest, PayloadIdsCountAgainstTheIdLimit) {
  ExchangeLimits limits;
  limits.max_ids = 2;
  std::optional<grpc::ByteBuffer> answer;
  ExchangeSession session(&store_, BufferPool::Create(), limits,
                          [&](grpc::ByteBuffer b) { answer = std::move(b); });
  const std::vector<int64_t> ids = {1, 2, 3};
  v1::FrameHeader h;
  v1::TensorRef* r = h.add_pull();
  r->set_key("emb");
  r->set_id_count(int64_t{1} << 62);  // far past the payload: the limit speaks first
  session.Handle(EncodeFrame(h, {Bytes(ids.data(), 24)}));
  ASSERT_TRUE(answer.has_value());
  DecodedFrame f;
  ASSERT_OK(f.Parse(*answer));
  EXPECT_EQ(f.header().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(f.header().message().find("the frame names 3 table ids; the limit is 2"),
            std::string::npos)
      << f.header().message();
}

// A session whose thread must not wait hands a push that meets a
// checkpoint's hold to its wait_elsewhere runner; the push is applied, and
// its frame answered, there once the hold ends. Without a hold it goes on
// at once on the caller's thread.
TEST_F(ExchangeSessionTest, APushMeetingAHoldIsHandedToTheThreadThatMayWait) {
  std::optional<grpc::ByteBuffer> answer;
  std::vector<std::function<void()>> handed;
  ExchangeSession session(
      &store_, BufferPool::Create(), ExchangeLimits(),
      [&](grpc::ByteBuffer b) { answer = std::move(b); },
      [&](std::function<void()> task) { handed.push_back(std::move(task)); });
  const std::vector<int64_t> ids = {4};
  const std::vector<float> grads = {0.5f, 1.5f};
  v1::FrameHeader push;
  v1::TensorRef* r = push.add_push();
  r->set_key("emb");
  for (int64_t id : ids) r->add_ids(id);
  r->set_bytes(8);

  session.Handle(EncodeFrame(push, {Bytes(grads.data(), 8)}));
  EXPECT_TRUE(handed.empty());
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(Rows({4}), std::vector<float>({-0.5f, -1.5f}));

  answer.reset();
  ASSERT_OK(store_.push_hold().Hold(absl::Seconds(30)));
  session.Handle(EncodeFrame(push, {Bytes(grads.data(), 8)}));
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_FALSE(answer.has_value());
  // The frame's bytes live on in the session after the caller drops them.
  store_.push_hold().Release();
  handed[0]();
  ASSERT_TRUE(answer.has_value());
  DecodedFrame f;
  ASSERT_OK(f.Parse(*answer));
  EXPECT_EQ(f.header().code(), 0) << f.header().message();
  EXPECT_EQ(Rows({4}), std::vector<float>({-1.0f, -3.0f}));
}

}  // namespace
}  // namespace pstrain::ps
