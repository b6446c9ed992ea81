// TLS 1.3 records sealed and opened in this process: what a sealer seals an
// opener with the same keys opens, into pieces or spilling past them, with
// padding or none; a changed, reordered or foreign record is refused and
// headers no TLS 1.3 peer sends are named. (That OpenSSL's own record
// layer and ours read each other's records: frame_tls_test.)
#include "transport/tls_record.h"

#include <string>
#include <vector>

#include "base/testing/status_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TrafficKeys Keys(size_t key_bytes, char fill) {
  TrafficKeys keys;
  keys.key = std::string(key_bytes, fill);
  keys.iv = std::string(12, static_cast<char>(fill + 1));
  return keys;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) % 251);
  return s;
}

// Seals `data` (at most one record's) as one record of `type`, from the
// pieces `cuts` divides it into.
std::string SealOne(RecordSealer& sealer, const std::string& data, unsigned char type = 23,
                    std::vector<size_t> cuts = {}, size_t padding = 0) {
  std::vector<iovec> pieces;
  size_t at = 0;
  cuts.push_back(data.size());
  for (size_t cut : cuts) {
    pieces.push_back({const_cast<char*>(data.data()) + at, cut - at});
    at = cut;
  }
  std::string out(SealedRecordBytes(data.size()) + padding, '\0');
  absl::StatusOr<size_t> n =
      sealer.Seal(type, pieces.data(), pieces.size(), data.size(), out.data(), padding);
  EXPECT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n.value_or(0), out.size());
  return out;
}

class TlsRecordTest : public ::testing::TestWithParam<size_t> {};

INSTANTIATE_TEST_SUITE_P(Aes128And256, TlsRecordTest, ::testing::Values(16, 32));

TEST_P(TlsRecordTest, WhatIsSealedOpensIntoPiecesAndTheRestSpills) {
  ASSERT_OK_AND_ASSIGN(auto sealer, RecordSealer::Make(Keys(GetParam(), 'k')));
  ASSERT_OK_AND_ASSIGN(auto opener, RecordOpener::Make(Keys(GetParam(), 'k')));
  // Records of 0 bytes to a full one, sealed from several pieces, opened
  // into pieces too short, just long enough and too long for them.
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{16383}, size_t{16384}}) {
    const std::string data = Pattern(size, static_cast<int>(size));
    const std::string record =
        SealOne(*sealer, data, 23, size > 8 ? std::vector<size_t>{3, 8} : std::vector<size_t>{});
    EXPECT_EQ(record[0], 23);
    EXPECT_EQ(record.size(), 5 + size + 1 + 16);
    ASSERT_OK_AND_ASSIGN(size_t bytes, RecordOpener::RecordBytes(
                                           reinterpret_cast<const unsigned char*>(record.data())));
    EXPECT_EQ(bytes, record.size());
    // The data is not in the record as it was.
    if (size >= 16) {
      EXPECT_EQ(record.find(data.substr(0, 16)), std::string::npos);
    }

    const size_t room = size / 2;
    std::string first(3, '\0'), second(room > 3 ? room - 3 : 0, '\0');
    std::vector<iovec> dst = {{first.data(), first.size()}, {second.data(), second.size()}};
    std::string spill(kTlsMaxRecordData, '\0');
    ASSERT_OK_AND_ASSIGN(
        RecordOpener::Opened opened,
        opener->Open(record.data(), record.size(), dst.data(), dst.size(), spill.data()));
    EXPECT_EQ(opened.type, 23);
    EXPECT_EQ(opened.placed + opened.spilled, size);
    EXPECT_EQ(opened.placed, std::min(size, first.size() + second.size()));
    const std::string got =
        (first + second).substr(0, opened.placed) + spill.substr(0, opened.spilled);
    EXPECT_EQ(got, data) << size;
  }
  EXPECT_EQ(sealer->sequence(), 6u);
  EXPECT_EQ(opener->sequence(), 6u);
}

TEST_P(TlsRecordTest, APaddedRecordAndAnAlertOpenToTheirTypeAndData) {
  ASSERT_OK_AND_ASSIGN(auto sealer, RecordSealer::Make(Keys(GetParam(), 'p')));
  ASSERT_OK_AND_ASSIGN(auto opener, RecordOpener::Make(Keys(GetParam(), 'p')));
  std::string spill(kTlsMaxRecordData, '\0');
  // Padding after the type: the data still ends where it ends, whether the
  // pieces hold all of the plaintext or part.
  const std::string data = Pattern(1000, 3);
  for (size_t room : {size_t{2000}, size_t{1000}, size_t{600}}) {
    const std::string record = SealOne(*sealer, data, 23, {}, 200);
    std::string into(room, '\0');
    iovec dst{into.data(), into.size()};
    ASSERT_OK_AND_ASSIGN(RecordOpener::Opened opened,
                         opener->Open(record.data(), record.size(), &dst, 1, spill.data()));
    EXPECT_EQ(opened.type, 23);
    EXPECT_EQ(opened.placed, std::min<size_t>(room, 1000));
    EXPECT_EQ(into.substr(0, opened.placed) + spill.substr(0, opened.spilled), data) << room;
  }
  // A close_notify alert: type 21, level 1, description 0.
  const std::string alert = SealOne(*sealer, std::string("\x01\x00", 2), 21);
  ASSERT_OK_AND_ASSIGN(RecordOpener::Opened opened,
                       opener->Open(alert.data(), alert.size(), nullptr, 0, spill.data()));
  EXPECT_EQ(opened.type, 21);
  EXPECT_EQ(opened.spilled, 2u);
  EXPECT_EQ(spill.substr(0, 2), std::string("\x01\x00", 2));
}

TEST_P(TlsRecordTest, AChangedReorderedOrForeignRecordIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto sealer, RecordSealer::Make(Keys(GetParam(), 'c')));
  ASSERT_OK_AND_ASSIGN(auto foreign, RecordSealer::Make(Keys(GetParam(), 'x')));
  std::string spill(kTlsMaxRecordData, '\0');
  std::string into(5000, '\0');
  iovec dst{into.data(), into.size()};
  const std::string data = Pattern(4000, 9);
  const std::string r0 = SealOne(*sealer, data);
  const std::string r1 = SealOne(*sealer, data);
  // Every byte that counts: the header (additional data), the ciphertext
  // and the tag.
  for (size_t at : {size_t{3}, size_t{5}, size_t{2000}, r0.size() - 1}) {
    ASSERT_OK_AND_ASSIGN(auto opener, RecordOpener::Make(Keys(GetParam(), 'c')));
    std::string changed = r0;
    changed[at] = static_cast<char>(changed[at] ^ 0x01);
    absl::StatusOr<RecordOpener::Opened> opened =
        opener->Open(changed.data(), changed.size(), &dst, 1, spill.data());
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss) << at;
    EXPECT_THAT(opened.status().message(), HasSubstr("a TLS record failed its integrity check"));
  }
  // Out of order: record 1 where 0 is due.
  ASSERT_OK_AND_ASSIGN(auto opener, RecordOpener::Make(Keys(GetParam(), 'c')));
  EXPECT_EQ(opener->Open(r1.data(), r1.size(), &dst, 1, spill.data()).status().code(),
            absl::StatusCode::kDataLoss);
  // Sealed with other keys.
  const std::string other = SealOne(*foreign, data);
  ASSERT_OK_AND_ASSIGN(auto fresh, RecordOpener::Make(Keys(GetParam(), 'c')));
  EXPECT_EQ(fresh->Open(other.data(), other.size(), &dst, 1, spill.data()).status().code(),
            absl::StatusCode::kDataLoss);
  // The right one still opens in its place.
  ASSERT_OK_AND_ASSIGN(RecordOpener::Opened opened,
                       fresh->Open(r0.data(), r0.size(), &dst, 1, spill.data()));
  EXPECT_EQ(into.substr(0, opened.placed), data);
  // A plaintext of padding alone has no content type.
  ASSERT_OK_AND_ASSIGN(auto zero_sealer, RecordSealer::Make(Keys(GetParam(), 'z')));
  ASSERT_OK_AND_ASSIGN(auto zero_opener, RecordOpener::Make(Keys(GetParam(), 'z')));
  const std::string typeless = SealOne(*zero_sealer, "", 0, {}, 4);
  absl::StatusOr<RecordOpener::Opened> none =
      zero_opener->Open(typeless.data(), typeless.size(), &dst, 1, spill.data());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(none.status().message(), HasSubstr("holds no content type"));
}

TEST(TlsRecordHeaderTest, HeadersNoPeerSendsAfterItsHandshakeAreNamed) {
  auto bytes = [](std::string h) {
    return RecordOpener::RecordBytes(reinterpret_cast<const unsigned char*>(h.data()));
  };
  EXPECT_THAT(bytes(std::string("\x16\x03\x03\x00\x20", 5)).status().message(),
              HasSubstr("outer type 22"));
  EXPECT_THAT(bytes(std::string("\x17\x03\x01\x00\x20", 5)).status().message(),
              HasSubstr("version 3.1"));
  EXPECT_THAT(bytes(std::string("\x17\x03\x03\x41\x01", 5)).status().message(),
              HasSubstr("of 16641 bytes"));
  EXPECT_THAT(bytes(std::string("\x17\x03\x03\x00\x10", 5)).status().message(),
              HasSubstr("of 16 bytes"));
  ASSERT_OK_AND_ASSIGN(size_t most, bytes(std::string("\x17\x03\x03\x41\x00", 5)));
  EXPECT_EQ(most, 5 + kTlsMaxCiphertext);

  TrafficKeys bad = Keys(24, 'b');
  EXPECT_EQ(RecordSealer::Make(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RecordOpener::Make(bad).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(auto sealer, RecordSealer::Make(Keys(16, 'b')));
  std::string out(SealedRecordBytes(kTlsMaxRecordData + 1), '\0');
  std::string data(kTlsMaxRecordData + 1, 'd');
  iovec piece{data.data(), data.size()};
  EXPECT_EQ(sealer->Seal(23, &piece, 1, data.size(), out.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sealer->sequence(), 0u);
}

}  // namespace
}  // namespace pstrain
