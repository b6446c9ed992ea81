// Request and answer coding of the Exchange stream: a request the client
// builds reads back, through the PS's own decoder (ps_server/
// exchange_session.h), as the refs, ids and gradient bytes it was built
// from; an answer lands in the caller's arrays with its versions; bfloat16
// halves the bytes both ways; an answer that does not match is refused
// naming the PS and the tensor.
#include "client/frame_coding.h"

#include <cstring>
#include <vector>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/exchange_session.h"

namespace pstrain::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What a request built by the client reads as on the PS.
struct Received {
  DecodedFrame frame;
  std::vector<int64_t> ids;
  std::vector<ps::ShardStore::TensorRef> push, pull;
};

void Receive(const v1::FrameHeader& h, std::vector<grpc::Slice> payload, Received* r) {
  const grpc::ByteBuffer buffer = EncodeFrame(h, std::move(payload));
  ASSERT_OK(r->frame.Parse(buffer));
  ASSERT_OK(ps::FrameRefs(&r->frame, &r->ids, &r->push, &r->pull));
}

std::vector<float> Floats(const DecodedFrame& f, int64_t offset, int64_t n) {
  std::vector<float> out(n);
  f.CopyPayload(offset, n * 4, out.data());
  return out;
}

TEST(FrameCodingTest, ADenseRequestNamesEachSliceAndCarriesItsGradientUnchanged) {
  std::vector<float> grads = {1, 2, 3, 4, 5}, values(5, 0);
  const std::vector<DenseSlice> slices = {
      {"w/part_0", 12, 7, grads.data(), values.data()},
      {"b/part_0", 8, 9, grads.data() + 3, nullptr},
  };
  auto pool = BufferPool::Create();
  v1::FrameHeader h;
  std::vector<grpc::Slice> payload;
  ReplyInto reply_into;
  EncodeDense(slices, /*bfloat16=*/false, *pool, &h, &payload, &reply_into);
  Received r;
  Receive(h, std::move(payload), &r);
  ASSERT_EQ(r.push.size(), 2u);
  EXPECT_EQ(r.push[0].key, "w/part_0");
  EXPECT_EQ(r.push[0].bytes, 12);
  EXPECT_EQ(r.push[0].version, 7);
  EXPECT_EQ(r.push[1].version, 9);
  ASSERT_EQ(r.pull.size(), 1u);
  EXPECT_EQ(r.pull[0].key, "w/part_0");
  EXPECT_EQ(Floats(r.frame, 0, 5), grads);
  // The pulled slice's answer goes straight to its values.
  ASSERT_EQ(reply_into.size(), 1u);
  EXPECT_EQ(reply_into[0].first, reinterpret_cast<char*>(values.data()));
  EXPECT_EQ(reply_into[0].second, 12);
}

// The PS's answer to a pull of `slices`: each pulled slice's values
// (`values` back to back) and version.
grpc::ByteBuffer Answer(const std::vector<float>& values, std::vector<int64_t> versions,
                        std::vector<int64_t> bytes) {
  v1::FrameHeader h;
  for (size_t i = 0; i < versions.size(); ++i) {
    v1::TensorRef* r = h.add_pull();
    r->set_version(versions[i]);
    r->set_bytes(bytes[i]);
  }
  std::vector<grpc::Slice> payload;
  payload.emplace_back(values.data(), values.size() * 4);
  return EncodeFrame(h, std::move(payload));
}

TEST(FrameCodingTest, AnAnswerLandsInEachPulledSliceWithItsVersion) {
  std::vector<float> w(3, 0), b(2, 0);
  const std::vector<DenseSlice> slices = {
      {"w/part_0", 12, 0, nullptr, w.data()},
      {"x/part_0", 4, 0, nullptr, nullptr},  // pushed only: nothing comes back
      {"b/part_0", 8, 0, nullptr, b.data()},
  };
  DecodedFrame f;
  ASSERT_OK(f.Parse(Answer({1, 2, 3, 4, 5}, {11, 12}, {12, 8})));
  std::vector<int64_t> versions = {-1, -1, -1};
  ASSERT_OK(DecodeDense(f, slices, false, "ps:0", &versions));
  EXPECT_EQ(w, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(b, (std::vector<float>{4, 5}));
  EXPECT_THAT(versions, ElementsAre(11, -1, 12));

  // Another size than asked for is refused, naming the PS and the slice.
  DecodedFrame short_answer;
  ASSERT_OK(short_answer.Parse(Answer({1, 2, 3, 4}, {11, 12}, {12, 4})));
  const absl::Status s = DecodeDense(short_answer, slices, false, "ps:0", &versions);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("ps:0: pull of b/part_0 returned 4 bytes, expected 8"));
  DecodedFrame too_few;
  ASSERT_OK(too_few.Parse(Answer({1, 2, 3}, {11}, {12})));
  EXPECT_THAT(DecodeDense(too_few, slices, false, "ps:1", &versions).message(),
              HasSubstr("ps:1: pull returned 1 tensors for 2 slices"));
}

TEST(FrameCodingTest, Bfloat16HalvesTheBytesBothWays) {
  std::vector<float> grads = {1.5f, -2.0f, 0.25f, 1024.0f};
  std::vector<float> values(4, 0);
  const std::vector<DenseSlice> slices = {{"w/part_0", 16, 3, grads.data(), values.data()}};
  auto pool = BufferPool::Create();
  v1::FrameHeader h;
  std::vector<grpc::Slice> payload;
  ReplyInto reply_into;
  EncodeDense(slices, /*bfloat16=*/true, *pool, &h, &payload, &reply_into);
  Received r;
  Receive(h, std::move(payload), &r);
  ASSERT_EQ(r.push.size(), 1u);
  EXPECT_EQ(r.push[0].bytes, 8);
  EXPECT_EQ(r.frame.payload_size(), 8);
  EXPECT_EQ(reply_into[0].second, 8);
  // These values are exact in bfloat16: the answer widens back to them.
  std::vector<uint16_t> narrow(4);
  for (int i = 0; i < 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &grads[i], 4);
    narrow[i] = static_cast<uint16_t>(bits >> 16);
  }
  v1::FrameHeader answer;
  v1::TensorRef* ref = answer.add_pull();
  ref->set_bytes(8);
  ref->set_version(4);
  std::vector<grpc::Slice> bytes;
  bytes.emplace_back(narrow.data(), 8);
  DecodedFrame f;
  ASSERT_OK(f.Parse(EncodeFrame(answer, std::move(bytes))));
  std::vector<int64_t> versions;
  ASSERT_OK(DecodeDense(f, slices, true, "ps:0", &versions));
  EXPECT_EQ(values, grads);
  EXPECT_THAT(versions, ElementsAre(4));
}

TEST(FrameCodingTest, RowsCarryTheirIdsFirstAndTheirGradientRowsInIdOrder) {
  // Table "e" (dim 2): this PS owns ids 7 and 3, rows 1 and 4 of the
  // caller's array; table "f" (dim 1) is pulled, ids 5, 6 in order.
  const std::vector<int64_t> e_ids = {7, 3}, f_ids = {5, 6};
  const std::vector<size_t> e_pos = {1, 4};
  std::vector<float> e_grads = {0, 0, 10, 11, 0, 0, 0, 0, 40, 41};
  std::vector<float> f_out(2, 0);
  const std::vector<TableRef> push = {{"e", 2, e_ids, e_pos, 5, e_grads.data(), nullptr}};
  const std::vector<TableRef> pull = {{"f", 1, f_ids, {}, 0, nullptr, f_out.data()}};
  auto pool = BufferPool::Create();
  v1::FrameHeader h;
  std::vector<grpc::Slice> payload;
  EXPECT_EQ(EncodeRows(push, pull, false, *pool, &h, &payload), 8);
  Received r;
  Receive(h, std::move(payload), &r);
  ASSERT_EQ(r.push.size(), 1u);
  EXPECT_EQ(r.push[0].key, "e");
  EXPECT_EQ(r.push[0].version, 5);
  EXPECT_EQ(r.push[0].bytes, 16);
  EXPECT_THAT(r.push[0].ids, ElementsAre(7, 3));
  ASSERT_EQ(r.pull.size(), 1u);
  EXPECT_THAT(r.pull[0].ids, ElementsAre(5, 6));
  // The ids left the payload; the gradient rows remain, in the refs' order.
  EXPECT_EQ(Floats(r.frame, 0, 4), (std::vector<float>{10, 11, 40, 41}));

  // The answer: f's rows, into place.
  v1::FrameHeader answer;
  answer.add_pull()->set_version(9);
  std::vector<float> rows = {0.5f, 0.75f};
  std::vector<grpc::Slice> bytes;
  bytes.emplace_back(rows.data(), 8);
  DecodedFrame f;
  ASSERT_OK(f.Parse(EncodeFrame(answer, std::move(bytes))));
  std::vector<int64_t> versions;
  ASSERT_OK(DecodeRows(f, pull, false, "ps:1", &versions));
  EXPECT_EQ(f_out, rows);
  EXPECT_THAT(versions, ElementsAre(9));
  DecodedFrame wrong;
  ASSERT_OK(wrong.Parse(EncodeFrame(answer, {})));
  EXPECT_THAT(DecodeRows(wrong, pull, false, "ps:1", &versions).message(),
              HasSubstr("ps:1: pull of 1 tables' rows returned 0 bytes, expected 8"));
}

}  // namespace
}  // namespace pstrain::client
