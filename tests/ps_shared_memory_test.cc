// Tensor bytes through shared memory between a client and a PS on one host,
// over real gRPC on loopback: the values are those of the frames' path, the
// client falls back to the frames when the PS declines, and a frame that
// names shared memory wrongly gets a status naming the problem while the
// stored values stay as they were.
#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cluster/placement.h"
#include "transport/shared_memory.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"
#include "ps_server/testing/local_ps.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/ps_stream.h"

namespace pstrain {
namespace {

using client::PsClient;
using client::PsClientOptions;

constexpr int kRows = 100;
constexpr int kDim = 4;

// Names in /dev/shm this process made.
std::vector<std::string> OurSharedNames() {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat("pstrain-", getpid(), "-");
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (absl::StartsWith(e->d_name, prefix)) names.push_back(e->d_name);
  }
  closedir(dir);
  return names;
}

class PsSharedMemoryTest : public ::testing::Test {
 protected:
  void Start(bool ps_allows) {
    ps::PsServiceOptions options;
    options.shared_memory = ps_allows;
    ASSERT_OK_AND_ASSIGN(ps_, ps::testing::LocalPs::Start(1, options));
    VariableDef emb{"emb", {1000, kDim}};
    emb.embedding = true;
    ASSERT_OK_AND_ASSIGN(placement_, ComputePlacement({{"w", {kRows}}, emb}, 1));
    init_.resize(kRows);
    for (int i = 0; i < kRows; ++i) init_[i] = static_cast<float>(i);
    auto creator = Client(false);
    client::CreateOptions create;
    create.optimizer = {"sgd", 1.0f};
    ASSERT_OK(client::PsAdmin(&creator->control()).CreateVariables(placement_, init_, {0}, create).status());
  }

  std::unique_ptr<client::PsClient> Client(bool shared_memory) {
    client::PsClientOptions o;
    o.ps_addresses = ps_->addresses();
    o.rpc_deadline = absl::Seconds(5);
    o.shared_memory = shared_memory;
    auto c = client::PsClient::Create(o, placement_);
    EXPECT_OK(c.status());
    return *std::move(c);
  }

  std::vector<float> Pull() {
    std::vector<float> v(kRows);
    auto client = Client(false);
    EXPECT_OK(client->PullAll(v.data(), {0}).status());
    return v;
  }

  std::unique_ptr<ps::testing::LocalPs> ps_;
  Placement placement_;
  std::vector<float> init_;
};

TEST_F(PsSharedMemoryTest, PushesAndPullsThroughTheRegionGiveTheFramesValues) {
  Start(true);
  auto client = Client(true);
  std::vector<float> grads(kRows), params(kRows);
  for (int i = 0; i < kRows; ++i) grads[i] = 0.5f * static_cast<float>(i % 7);
  constexpr int kSteps = 20;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_OK(client->PushPullAll(grads.data(), params.data(), {0}).status());
    // Between frames the name is gone: the PS mapped the region.
    EXPECT_TRUE(OurSharedNames().empty());
  }
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ(params[i], init_[i] - kSteps * grads[i]) << "element " << i;
  }
  EXPECT_EQ(Pull(), params);
  // The first exchange may go in the frame before the PS has answered the
  // offer; the rest go through the region.
  EXPECT_GE(client->SharedMemoryFrames(), kSteps - 1);

  // Table rows: pulled (created from the seed), pushed, pulled again.
  const std::vector<int64_t> ids = {3, 999, 42, 3};
  std::vector<float> before(ids.size() * kDim), after(ids.size() * kDim);
  std::vector<float> row_grads(ids.size() * kDim);
  for (size_t i = 0; i < row_grads.size(); ++i) row_grads[i] = 0.25f * static_cast<float>(i);
  const int64_t frames = client->SharedMemoryFrames();
  ASSERT_OK(client->PullRows("emb", ids, before.data()));
  ASSERT_OK(client->PushRows("emb", ids, row_grads.data()));
  ASSERT_OK(client->PullRows("emb", ids, after.data()));
  EXPECT_EQ(client->SharedMemoryFrames(), frames + 3);
  auto inline_client = Client(false);
  std::vector<float> inline_after(ids.size() * kDim);
  ASSERT_OK(inline_client->PullRows("emb", ids, inline_after.data()));
  EXPECT_EQ(after, inline_after);
  for (int d = 0; d < kDim; ++d) {
    // id 3 appears twice: both gradients apply to its one row.
    EXPECT_FLOAT_EQ(after[d], before[d] - row_grads[d] - row_grads[3 * kDim + d]);
    EXPECT_FLOAT_EQ(after[kDim + d], before[kDim + d] - row_grads[kDim + d]);
  }
  client.reset();
  EXPECT_TRUE(OurSharedNames().empty());
}

TEST_F(PsSharedMemoryTest, APsThatDeclinesGetsTheBytesInTheFrames) {
  Start(false);
  auto client = Client(true);
  std::vector<float> grads(kRows, 1.0f), params(kRows);
  for (int step = 0; step < 5; ++step) {
    ASSERT_OK(client->PushPullAll(grads.data(), params.data(), {0}).status());
  }
  for (int i = 0; i < kRows; ++i) ASSERT_EQ(params[i], init_[i] - 5.0f);
  EXPECT_EQ(client->SharedMemoryFrames(), 0);
  EXPECT_TRUE(OurSharedNames().empty());
}

// Sends `h` (and `payload` in the frame) on `stream`; returns the status
// and, when OK, the response header.
absl::Status Send(client::PsStream& stream, const v1::FrameHeader& h, std::string payload,
                  v1::FrameHeader* response = nullptr) {
  std::vector<grpc::Slice> slices;
  if (!payload.empty()) slices.push_back(grpc::Slice(payload));
  return stream.Call(h, std::move(slices), absl::Seconds(5), [&](const DecodedFrame& f) {
    if (response != nullptr) *response = f.header();
    return absl::OkStatus();
  });
}

TEST_F(PsSharedMemoryTest, TheProtocolOnARegionTheTestMakes) {
  Start(true);
  auto channel = grpc::CreateChannel(ps_->addresses()[0].ToString(),
                                     grpc::InsecureChannelCredentials());
  // A stream with shared memory off sends headers as written.
  client::PsStream stream(channel, "ps:0");
  v1::FrameHeader push;
  v1::TensorRef* r = push.add_push();
  r->set_key("w/part_0");
  r->set_bytes(kRows * 4);

  // Before any region is attached.
  v1::FrameHeader h = push;
  h.set_shm_payload_offset(SharedRegion::kDataStart);
  h.set_shm_payload_bytes(kRows * 4);
  absl::Status s = Send(stream, h, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(),
            "ps:0: Exchange: the frame names shared memory, but the stream has none attached");

  // An offer of a region that is not there, or not the one named: declined,
  // saying why.
  constexpr int64_t kRegion = 8192;
  ASSERT_OK_AND_ASSIGN(auto region, SharedRegion::Create(kRegion));
  v1::FrameHeader offer;
  v1::SharedRegionRef* ref = offer.mutable_shm_attach();
  ref->set_name("/pstrain-no-such-region");
  ref->set_bytes(kRegion);
  ref->set_token(region->token());
  v1::FrameHeader answer;
  ASSERT_OK(Send(stream, offer, "", &answer));
  EXPECT_FALSE(answer.shm_attached());
  EXPECT_TRUE(absl::StrContains(answer.message(),
                                "cannot open shared memory /pstrain-no-such-region"))
      << answer.message();
  ref->set_name(region->name());
  ref->set_token(region->token() ^ 1);
  ASSERT_OK(Send(stream, offer, "", &answer));
  EXPECT_FALSE(answer.shm_attached());
  EXPECT_TRUE(absl::StrContains(answer.message(), "does not hold the client's token"))
      << answer.message();
  // The right one.
  ref->set_token(region->token());
  ASSERT_OK(Send(stream, offer, "", &answer));
  EXPECT_TRUE(answer.shm_attached()) << answer.message();
  ASSERT_OK(Send(stream, offer, "", &answer));
  EXPECT_FALSE(answer.shm_attached());
  EXPECT_EQ(answer.message(), "the stream already has shared memory " + region->name());

  // Wrong places.
  h.set_shm_payload_offset(kRegion - 100);
  s = Send(stream, h, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "ps:0: Exchange: the frame's payload of 400 bytes at offset 8092 lies "
                         "outside the shared memory of 8192 bytes");
  h.set_shm_payload_offset(8);  // over the token
  s = Send(stream, h, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  h.set_shm_payload_offset(SharedRegion::kDataStart);
  s = Send(stream, h, std::string(kRows * 4, '\0'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "ps:0: Exchange: the frame carries 400 payload bytes and names a "
                         "payload in shared memory too");
  v1::FrameHeader pull;
  pull.add_pull()->set_key("w/part_0");
  pull.set_shm_reply_offset(-64);
  pull.set_shm_reply_capacity(kRows * 4);
  s = Send(stream, pull, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "ps:0: Exchange: the frame's reply space of 400 bytes at offset -64 "
                         "lies outside the shared memory of 8192 bytes");
  EXPECT_EQ(Pull(), init_);

  // Right: gradients of 2 written into the region, the new values read back
  // from the reply space the frame names.
  std::vector<float> twos(kRows, 2.0f);
  std::memcpy(region->data() + SharedRegion::kDataStart, twos.data(), kRows * 4);
  h = push;
  h.add_pull()->set_key("w/part_0");
  h.set_shm_payload_offset(SharedRegion::kDataStart);
  h.set_shm_payload_bytes(kRows * 4);
  h.set_shm_reply_offset(4096);
  h.set_shm_reply_capacity(kRows * 4);
  ASSERT_OK(Send(stream, h, "", &answer));
  EXPECT_TRUE(answer.shm_reply());
  EXPECT_EQ(answer.shm_payload_bytes(), kRows * 4);
  std::vector<float> got(kRows);
  std::memcpy(got.data(), region->data() + 4096, kRows * 4);
  std::vector<float> want = init_;
  for (float& v : want) v -= 2.0f;
  EXPECT_EQ(got, want);
  EXPECT_EQ(Pull(), want);
  // Reply space too small for the values: they come in the frame instead.
  h.set_shm_reply_capacity(kRows * 4 - 4);
  ASSERT_OK(Send(stream, h, "", &answer));
  EXPECT_FALSE(answer.shm_reply());
}

}  // namespace
}  // namespace pstrain
