#include "transport/tls_record.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace pstrain {
namespace {

const EVP_CIPHER* CipherFor(size_t key_bytes) {
  return key_bytes == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm();
}

}  // namespace

absl::Status RecordCipher::Init(const TrafficKeys& keys, bool encrypt) {
  if ((keys.key.size() != 16 && keys.key.size() != 32) || keys.iv.size() != 12) {
    return absl::InvalidArgumentError(absl::StrCat("TLS record keys of ", keys.key.size(), " and ",
                                                   keys.iv.size(),
                                                   " bytes (16 or 32, and 12 expected)"));
  }
  ctx_ = EVP_CIPHER_CTX_new();
  const auto* key = reinterpret_cast<const unsigned char*>(keys.key.data());
  if (ctx_ == nullptr || EVP_CipherInit_ex(ctx_, CipherFor(keys.key.size()), nullptr, key, nullptr,
                                           encrypt ? 1 : 0) != 1) {
    return absl::InternalError(TakeTlsErrors("cannot set up AES-GCM"));
  }
  std::memcpy(iv_, keys.iv.data(), 12);
  return absl::OkStatus();
}

RecordCipher::~RecordCipher() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(iv_, sizeof(iv_));
}

bool RecordCipher::StartRecord() {
  unsigned char nonce[12];
  std::memcpy(nonce, iv_, 12);
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<unsigned char>(sequence_ >> (8 * i));
  return EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, nonce, -1) == 1;
}

absl::StatusOr<std::unique_ptr<RecordSealer>> RecordSealer::Make(const TrafficKeys& keys) {
  std::unique_ptr<RecordSealer> sealer(new RecordSealer());
  PSTRAIN_RETURN_IF_ERROR(sealer->Init(keys, /*encrypt=*/true));
  return sealer;
}

absl::StatusOr<size_t> RecordSealer::Seal(unsigned char type, const iovec* pieces, size_t count,
                                          size_t bytes, char* out, size_t padding) {
  if (bytes > kTlsMaxRecordData || bytes + 1 + padding + kTlsTagBytes > kTlsMaxCiphertext) {
    return absl::InvalidArgumentError(
        absl::StrCat("a TLS record of ", bytes, " bytes and ", padding, " of padding"));
  }
  const size_t length = bytes + 1 + padding + kTlsTagBytes;
  auto* header = reinterpret_cast<unsigned char*>(out);
  header[0] = kTlsApplicationData;
  header[1] = 3;
  header[2] = 3;
  header[3] = static_cast<unsigned char>(length >> 8);
  header[4] = static_cast<unsigned char>(length & 0xff);
  auto* p = header + kTlsHeaderBytes;
  int n = 0;
  bool ok = StartRecord() && EVP_EncryptUpdate(ctx_, nullptr, &n, header, kTlsHeaderBytes) == 1;
  size_t sealed = 0;
  for (size_t i = 0; ok && i < count; ++i) {
    const size_t len = std::min(pieces[i].iov_len, bytes - sealed);
    if (len == 0) continue;
    ok = EVP_EncryptUpdate(ctx_, p, &n, static_cast<const unsigned char*>(pieces[i].iov_base),
                           static_cast<int>(len)) == 1 &&
         static_cast<size_t>(n) == len;
    p += len;
    sealed += len;
  }
  // The content type, then the padding.
  unsigned char trailer[1 + 256] = {type};
  ok = ok && sealed == bytes &&
       EVP_EncryptUpdate(ctx_, p, &n, trailer, static_cast<int>(1 + padding)) == 1 &&
       static_cast<size_t>(n) == 1 + padding;
  p += 1 + padding;
  ok = ok && EVP_EncryptFinal_ex(ctx_, p, &n) == 1 && n == 0 &&
       EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kTlsTagBytes, p) == 1;
  if (!ok) return absl::InternalError(TakeTlsErrors("AES-GCM failed to seal a TLS record"));
  ++sequence_;
  return kTlsHeaderBytes + length;
}

absl::StatusOr<std::unique_ptr<RecordOpener>> RecordOpener::Make(const TrafficKeys& keys) {
  std::unique_ptr<RecordOpener> opener(new RecordOpener());
  PSTRAIN_RETURN_IF_ERROR(opener->Init(keys, /*encrypt=*/false));
  return opener;
}

RecordOpener::~RecordOpener() { OPENSSL_cleanse(whole_.data(), whole_.size()); }

absl::StatusOr<size_t> RecordOpener::RecordBytes(const unsigned char* header) {
  if (header[0] != kTlsApplicationData) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a TLS record of outer type ", static_cast<int>(header[0]), " after the handshake"));
  }
  if (header[1] != 3 || header[2] != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a TLS record of version ", static_cast<int>(header[1]), ".", static_cast<int>(header[2])));
  }
  const size_t length = (size_t{header[3]} << 8) | header[4];
  if (length > kTlsMaxCiphertext || length < 1 + kTlsTagBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a TLS record of ", length, " bytes"));
  }
  return kTlsHeaderBytes + length;
}

bool RecordOpener::Begin(const char* header) {
  int n = 0;
  return StartRecord() &&
         EVP_DecryptUpdate(ctx_, nullptr, &n, reinterpret_cast<const unsigned char*>(header),
                           kTlsHeaderBytes) == 1;
}

bool RecordOpener::Decrypt(const char* in, size_t n, char* out) {
  int done = 0;
  return EVP_DecryptUpdate(ctx_, reinterpret_cast<unsigned char*>(out), &done,
                           reinterpret_cast<const unsigned char*>(in), static_cast<int>(n)) == 1 &&
         static_cast<size_t>(done) == n;
}

bool RecordOpener::Finish(const char* tag) {
  unsigned char copy[kTlsTagBytes];
  std::memcpy(copy, tag, kTlsTagBytes);
  int n = 0;
  unsigned char none[16];
  return EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kTlsTagBytes, copy) == 1 &&
         EVP_DecryptFinal_ex(ctx_, none, &n) == 1;
}

absl::StatusOr<RecordOpener::Opened> RecordOpener::Open(const char* record, size_t size,
                                                        const iovec* dst, size_t count,
                                                        char* spill) {
  const size_t body = size - kTlsHeaderBytes - kTlsTagBytes;  // data, type, padding
  const char* in = record + kTlsHeaderBytes;
  const absl::Status failed = absl::DataLossError("a TLS record failed its integrity check");
  if (!Begin(record)) return failed;
  size_t done = 0;
  const char* last = nullptr;  // the plaintext's last byte
  for (size_t i = 0; i < count && done < body; ++i) {
    const size_t take = std::min(dst[i].iov_len, body - done);
    if (take == 0) continue;
    char* to = static_cast<char*>(dst[i].iov_base);
    if (!Decrypt(in + done, take, to)) return failed;
    last = to + take - 1;
    done += take;
  }
  const size_t in_dst = done;
  if (done < body) {
    if (!Decrypt(in + done, body - done, spill)) return failed;
    last = spill + (body - done) - 1;
  }
  if (!Finish(in + body)) {
    ERR_clear_error();
    return failed;
  }
  Opened opened;
  size_t data = body - 1;
  if (*last != 0) {
    opened.type = static_cast<unsigned char>(*last);
  } else {
    // Padding after the type (rare: neither OpenSSL nor the kernel pads by
    // default): open it again whole to find where the data ends.
    whole_.resize(body);
    if (!Begin(record) || !Decrypt(in, body, whole_.data()) || !Finish(in + body)) return failed;
    size_t t = body;
    while (t > 0 && whole_[t - 1] == 0) --t;
    if (t == 0) return absl::DataLossError("a TLS record holds no content type");
    opened.type = static_cast<unsigned char>(whole_[t - 1]);
    data = t - 1;  // `spill` already holds the plaintext past `dst`
  }
  ++sequence_;
  opened.placed = std::min(in_dst, data);
  opened.spilled = data - opened.placed;
  return opened;
}

}  // namespace pstrain
