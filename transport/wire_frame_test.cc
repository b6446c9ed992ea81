#include "transport/wire_frame.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/testing/byte_buffers.h"
#include "base/testing/status_testing.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::pstrain::testing::Flatten;

// Splits `bytes` into slices of `chunk` bytes, as a socket read may.
grpc::ByteBuffer Chunked(const std::string& bytes, size_t chunk) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    slices.emplace_back(bytes.data() + i, std::min(chunk, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(WireFrameTest, EncodingIsProtobufFrameAndRoundTrips) {
  v1::FrameHeader h;
  h.set_request_id(7);
  h.add_push()->set_key("w/part_0");
  h.mutable_push(0)->set_bytes(6);
  const std::string a = "abc", b = "def";
  grpc::ByteBuffer buf = EncodeFrame(h, {BorrowSlice(a.data(), 3), BorrowSlice(b.data(), 3)});
  const std::string wire = Flatten(buf);

  v1::Frame generated;
  ASSERT_TRUE(generated.ParseFromString(wire));
  EXPECT_EQ(generated.header().request_id(), 7u);
  EXPECT_EQ(generated.payload(), "abcdef");
  EXPECT_EQ(generated.SerializeAsString(), wire);

  for (size_t chunk : {1, 2, 5, 1000}) {
    DecodedFrame f;
    ASSERT_OK(f.Parse(Chunked(wire, chunk)));
    EXPECT_EQ(f.header().push(0).key(), "w/part_0");
    ASSERT_EQ(f.payload_size(), 6);
    std::string got(4, '?');
    f.CopyPayload(1, 4, got.data());
    EXPECT_EQ(got, "bcde") << chunk;
  }
}

TEST(WireFrameTest, FloatRunsCoverThePayloadInOrderWhateverTheSlicing) {
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  v1::FrameHeader h;
  h.set_request_id(1);
  const std::string pad = "xyz";  // floats start 3 bytes into the payload
  const grpc::ByteBuffer buf = EncodeFrame(
      h, {BorrowSlice(pad.data(), pad.size()), BorrowSlice(values.data(), values.size() * 4)});
  const std::string wire = Flatten(buf);
  for (size_t chunk : {1, 3, 4, 7, 64, 4096, 100000}) {
    DecodedFrame f;
    ASSERT_OK(f.Parse(Chunked(wire, chunk)));
    std::vector<float> got;
    int64_t runs = 0;
    f.payload().ForEachFloatRun(3, 1000, 100, [&](int64_t first, const char* p, int64_t count) {
      ASSERT_EQ(first, static_cast<int64_t>(got.size())) << chunk;
      ASSERT_GE(count, 1);
      ASSERT_LE(count, 100);
      for (int64_t k = 0; k < count; ++k) {
        float v;
        std::memcpy(&v, p + 4 * k, 4);
        got.push_back(v);
      }
      ++runs;
    });
    EXPECT_EQ(got, values) << chunk;
    if (chunk == 100000) {
      EXPECT_EQ(runs, 10);  // one slice: runs of max_run
    }
  }
}

std::string Concat(const std::vector<grpc::Slice>& slices) {
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(WireFrameTest, RewrittenFloatsReplaceThePayloadAndGoBackInItsOwnSlices) {
  std::vector<float> values(1000), doubled(1000);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.5f * static_cast<float>(i);
    doubled[i] = 2 * values[i] + 1;
  }
  v1::FrameHeader h;
  const std::string pad = "xyz";  // floats start 3 bytes in: some straddle slices
  const std::string wire = Flatten(EncodeFrame(
      h, {BorrowSlice(pad.data(), pad.size()), BorrowSlice(values.data(), values.size() * 4)}));
  const std::string want(reinterpret_cast<const char*>(doubled.data()), 4000);
  for (size_t chunk : {1, 3, 4, 7, 64, 4096, 100000}) {
    DecodedFrame f;
    ASSERT_OK(f.Parse(Chunked(wire, chunk)));
    ASSERT_TRUE(f.payload_in_slices());
    int64_t seen = 0;
    f.mutable_payload().RewriteFloatRuns(3, 1000, 100, [&](int64_t first, char* p, int64_t count) {
      ASSERT_EQ(first, seen) << chunk;
      for (int64_t k = 0; k < count; ++k) {
        float v;
        std::memcpy(&v, p + 4 * k, 4);
        ASSERT_EQ(v, values[first + k]) << chunk;
        v = 2 * v + 1;
        std::memcpy(p + 4 * k, &v, 4);
      }
      seen += count;
    });
    EXPECT_EQ(seen, 1000);
    // Read back every way: the new floats, the bytes before them unchanged.
    std::string got(4000, '?');
    f.CopyPayload(3, 4000, got.data());
    EXPECT_EQ(got, want) << chunk;
    std::string streamed(4001, '?');  // odd destination alignment too
    f.StreamPayload(3, 4000, streamed.data() + 1);
    EXPECT_EQ(streamed.substr(1), want) << chunk;
    EXPECT_EQ(streamed[0], '?');
    EXPECT_EQ(Concat(f.PayloadSlices(3, 4000)), want) << chunk;
    EXPECT_EQ(Concat(f.PayloadSlices(0, 3)), "xyz") << chunk;
    EXPECT_EQ(Concat(f.PayloadSlices(1001, 8)), want.substr(998, 8)) << chunk;
    EXPECT_TRUE(f.PayloadSlices(5, 0).empty());
  }
  // The slices share the received memory: they hold what is written after.
  DecodedFrame f;
  ASSERT_OK(f.Parse(Chunked(wire, 1024)));
  const std::vector<grpc::Slice> sent = f.PayloadSlices(3, 4000);
  ASSERT_EQ(sent.size(), 4u);  // one per received slice
  f.mutable_payload().RewriteFloatRuns(
      3, 1000, 1000, [](int64_t, char* p, int64_t count) { std::memset(p, 0, count * 4); });
  EXPECT_EQ(Concat(sent), std::string(4000, '\0'));
  f.SetExternalPayload(pad.data(), 3);
  EXPECT_FALSE(f.payload_in_slices());
}

TEST(WireFrameTest, AnExternalPayloadReadsLikeOneSlice) {
  std::vector<char> memory(3 + 400);
  std::vector<float> values(100);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.5f * static_cast<float>(i);
  std::memcpy(memory.data() + 3, values.data(), 400);
  v1::FrameHeader h;
  h.set_request_id(9);
  DecodedFrame f;
  ASSERT_OK(f.Parse(EncodeFrame(h, {})));
  f.SetExternalPayload(memory.data(), static_cast<int64_t>(memory.size()));
  EXPECT_EQ(f.header().request_id(), 9u);
  EXPECT_EQ(f.payload_size(), 403);
  std::vector<float> got;
  f.payload().ForEachFloatRun(3, 100, 64, [&](int64_t first, const char* p, int64_t count) {
    ASSERT_EQ(first, static_cast<int64_t>(got.size()));
    for (int64_t k = 0; k < count; ++k) {
      float v;
      std::memcpy(&v, p + 4 * k, 4);
      got.push_back(v);
    }
  });
  EXPECT_EQ(got, values);
  float last;
  f.CopyPayload(399, 4, &last);
  EXPECT_EQ(last, values[99]);
  f.SetExternalPayload(nullptr, 0);
  EXPECT_EQ(f.payload_size(), 0);
}

TEST(WireFrameTest, TakingThePayloadsFrontLeavesTheRestInPlaceWhateverTheSlicing) {
  std::string payload;
  for (int i = 0; i < 60; ++i) payload.push_back(static_cast<char>('a' + i % 26));
  v1::FrameHeader h;
  h.set_request_id(3);
  const std::string wire = Flatten(EncodeFrame(h, {BorrowSlice(payload.data(), payload.size())}));
  for (size_t chunk : {1, 7, 16, 1000}) {
    for (int64_t take : {0, 1, 16, 17, 60}) {
      DecodedFrame f;
      ASSERT_OK(f.Parse(Chunked(wire, chunk)));
      std::string front(take, '\0');
      f.TakePayloadFront(take, front.data());
      EXPECT_EQ(front, payload.substr(0, take)) << chunk << " " << take;
      ASSERT_EQ(f.payload_size(), 60 - take);
      std::string rest(60 - take, '\0');
      f.CopyPayload(0, 60 - take, rest.data());
      EXPECT_EQ(rest, payload.substr(take)) << chunk << " " << take;
      // The rest is still sent back from the received slices.
      std::string resent;
      for (const grpc::Slice& s : f.PayloadSlices(0, f.payload_size())) {
        resent.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      EXPECT_EQ(resent, payload.substr(take)) << chunk << " " << take;
    }
  }
  // An external payload (shared memory) loses its front the same way.
  DecodedFrame f;
  ASSERT_OK(f.Parse(EncodeFrame(h, {})));
  f.SetExternalPayload(payload.data(), 60);
  char two[2];
  f.TakePayloadFront(2, two);
  EXPECT_EQ(std::string(two, 2), "ab");
  std::string rest(58, '\0');
  f.CopyPayload(0, 58, rest.data());
  EXPECT_EQ(rest, payload.substr(2));
}

TEST(WireFrameTest, EmptyPayloadAndEmptyFrame) {
  v1::FrameHeader h;
  h.set_code(5);
  DecodedFrame f;
  ASSERT_OK(f.Parse(EncodeFrame(h, {})));
  EXPECT_EQ(f.header().code(), 5);
  EXPECT_EQ(f.payload_size(), 0);
  v1::Frame empty;
  ASSERT_OK(f.Parse(Chunked(empty.SerializeAsString() + "", 1)));
  EXPECT_EQ(f.header().code(), 0);
}

TEST(WireFrameTest, RejectsMalformedFramesNamingTheProblem) {
  DecodedFrame f;
  absl::Status s = f.Parse(Chunked(std::string("\x1a\x01x", 3), 8));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(),
            "frame: unexpected field tag 26 (a Frame holds one header and one payload)");
  s = f.Parse(Chunked(std::string("\x12\x09xyz", 5), 8));
  EXPECT_EQ(s.message(), "frame: payload of 9 bytes is truncated");
  s = f.Parse(Chunked(std::string("\x0a\x03\xff\xff\xff", 5), 8));
  EXPECT_EQ(s.message(), "frame: header is not a valid FrameHeader");
  s = f.Parse(Chunked(std::string("\x0a", 1), 8));
  EXPECT_EQ(s.message(), "frame: truncated field tag or length");
}

TEST(WireFrameTest, PoolReusesBuffersAfterGrpcReleasesThem) {
  auto pool = BufferPool::Create();
  char* first;
  {
    BufferPool::Buffer b = pool->Acquire(1 << 20);
    first = b.data();
    std::memset(b.data(), 1, b.size());
    grpc::Slice s = std::move(b).ToSlice();
    EXPECT_EQ(s.size(), 1u << 20);
    EXPECT_EQ(pool->free_bytes(), 0);
  }  // the slice's last reference goes: the buffer is idle again
  EXPECT_EQ(pool->free_bytes(), 1 << 20);
  BufferPool::Buffer again = pool->Acquire(1000);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool->free_bytes(), 0);
}

TEST(WireFrameTest, PoolKeepsNoMoreIdleBytesThanItsCap) {
  auto pool = BufferPool::Create(/*max_free_bytes=*/3000);
  {
    BufferPool::Buffer a = pool->Acquire(2000);
    BufferPool::Buffer b = pool->Acquire(2000);
  }
  EXPECT_EQ(pool->free_bytes(), 2000);
}

TEST(WireFrameTest, FramePrefixFindsThePayloadFromTheFirstBytes) {
  v1::FrameHeader h;
  h.set_request_id(5);
  h.add_pull()->set_bytes(300);
  const std::string payload(300, 'p');
  const std::string wire = Flatten(EncodeFrame(h, {BorrowSlice(payload.data(), 300)}));
  size_t header_end = 0, payload_at = 0;
  uint64_t payload_size = 0;
  // The first bytes up to the payload's length are enough.
  const size_t start = wire.size() - 300;
  ASSERT_TRUE(FramePrefix(absl::string_view(wire).substr(0, start), &header_end, &payload_at,
                          &payload_size));
  EXPECT_EQ(payload_at, start);
  EXPECT_EQ(payload_size, 300u);
  EXPECT_EQ(wire.substr(payload_at), payload);
  // head[0, header_end) is the header alone, a frame without payload.
  DecodedFrame f;
  const std::string head = wire.substr(0, header_end);
  ASSERT_OK(f.Parse(Chunked(head, 7)));
  EXPECT_EQ(f.header().request_id(), 5u);
  EXPECT_EQ(f.payload_size(), 0);
  // Too few bytes, a frame without payload, or other bytes: false.
  EXPECT_FALSE(FramePrefix(absl::string_view(wire).substr(0, start - 1), &header_end, &payload_at,
                           &payload_size));
  EXPECT_FALSE(FramePrefix(Flatten(EncodeFrame(h, {})), &header_end, &payload_at, &payload_size));
  EXPECT_FALSE(FramePrefix("\xff\x01x", &header_end, &payload_at, &payload_size));
  EXPECT_FALSE(FramePrefix("", &header_end, &payload_at, &payload_size));
}

}  // namespace
}  // namespace pstrain
