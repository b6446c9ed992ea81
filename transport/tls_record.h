// TLS 1.3 records (RFC 8446 5.2) sealed and opened in this process with
// AES-GCM from OpenSSL's libcrypto, for a frame socket whose kernel does
// not take the connection's keys (transport/frame_socket.h). The handshake
// is OpenSSL's; after it, a frame socket seals many records into one
// buffer and sends them with one sendmsg, and opens records straight from
// what one recv brought into the frame's own memory. OpenSSL's record
// layer makes a system call or two per 16 KiB record and copies the
// plaintext once more: on loopback that cost more than the AES-GCM itself.
//
// The wire format is the standard one, so either end may be the kernel's
// (kTLS) or OpenSSL's own: a record is the 5-byte header (outer type
// application_data, legacy version 0x0303, the length), then the
// ciphertext of the data and its true content type, then the 16-byte tag;
// the header is the additional data, and the record with sequence number s
// (from 0, per direction) is sealed under nonce iv XOR s.
//
// One direction each: a RecordSealer is its writer's, a RecordOpener its
// reader's; neither is for two threads at once.
#ifndef PSTRAIN_TRANSPORT_TLS_RECORD_H_
#define PSTRAIN_TRANSPORT_TLS_RECORD_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/frame_tls.h"

struct evp_cipher_ctx_st;

namespace pstrain {

// Record content types (RFC 8446 5.1).
inline constexpr unsigned char kTlsAlert = 21;
inline constexpr unsigned char kTlsHandshake = 22;
inline constexpr unsigned char kTlsApplicationData = 23;

inline constexpr size_t kTlsHeaderBytes = 5;
inline constexpr size_t kTlsTagBytes = 16;
// The most data one record carries (2^14), and the most ciphertext a
// record may hold (2^14 + 256: data, content type, padding and tag).
inline constexpr size_t kTlsMaxRecordData = 16384;
inline constexpr size_t kTlsMaxCiphertext = 16384 + 256;

// The bytes of a record holding `data` bytes, as a RecordSealer seals it
// (no padding).
constexpr size_t SealedRecordBytes(size_t data) {
  return kTlsHeaderBytes + data + 1 + kTlsTagBytes;
}

// What a sealer and an opener share: one direction's AES-GCM context,
// keyed, its IV, and the sequence number of its next record.
class RecordCipher {
 public:
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;
  uint64_t sequence() const { return sequence_; }

 protected:
  RecordCipher() = default;
  // For keys of 16 bytes (AES-128-GCM) or 32 (AES-256-GCM) and a 12-byte
  // IV; InvalidArgument for other sizes, Internal when OpenSSL fails.
  absl::Status Init(const TrafficKeys& keys, bool encrypt);
  // Sets the context's nonce to that of record sequence_: the IV with the
  // sequence number, big-endian, XORed into its last 8 bytes.
  bool StartRecord();
  evp_cipher_ctx_st* ctx_ = nullptr;
  unsigned char iv_[12] = {};
  uint64_t sequence_ = 0;
};

class RecordSealer : public RecordCipher {
 public:
  // As RecordCipher::Init.
  static absl::StatusOr<std::unique_ptr<RecordSealer>> Make(const TrafficKeys& keys);

  // Seals the next record: content `type` with the `bytes` bytes that
  // `pieces` hold in order (at most kTlsMaxRecordData; a piece may be
  // empty), and `padding` zeros after the type (RFC 8446 5.4; the sealer's
  // users send none, a test sends some). Writes
  // SealedRecordBytes(bytes) + padding bytes at `out` and returns that
  // count. InvalidArgument when the record would be too long; Internal
  // when OpenSSL fails.
  absl::StatusOr<size_t> Seal(unsigned char type, const iovec* pieces, size_t count, size_t bytes,
                              char* out, size_t padding = 0);

 private:
  RecordSealer() = default;
};

class RecordOpener : public RecordCipher {
 public:
  // As RecordCipher::Init.
  static absl::StatusOr<std::unique_ptr<RecordOpener>> Make(const TrafficKeys& keys);
  ~RecordOpener();

  // The bytes of the record whose header is at `header` (5 bytes): the
  // header and the ciphertext after it. InvalidArgument naming what is
  // wrong for a header no TLS 1.3 peer sends after its handshake (another
  // outer type, another version, a length past kTlsMaxCiphertext or
  // shorter than a tag and a type).
  static absl::StatusOr<size_t> RecordBytes(const unsigned char* header);

  struct Opened {
    unsigned char type = 0;  // the record's true content type
    size_t placed = 0;       // its data bytes now at the start of `dst`
    size_t spilled = 0;      // the rest of its data, at `spill`
  };
  // Opens the next record, the `size` bytes at `record` (RecordBytes
  // long): checks its tag, then places its data in `dst` (pieces filled in
  // order, `count` of them, possibly none) and what does not fit at
  // `spill` (room for kTlsMaxRecordData bytes). Data bytes may be written
  // into `dst` before the tag is found wrong (the read then fails), and
  // bytes past `placed` in `dst` may be overwritten. DataLoss "a TLS record
  // failed its integrity check" when the tag is wrong (a changed record, a
  // record from elsewhere, or one out of order); DataLoss when its
  // plaintext holds no content type.
  absl::StatusOr<Opened> Open(const char* record, size_t size, const iovec* dst, size_t count,
                              char* spill);

 private:
  RecordOpener() = default;
  // Decrypts `n` bytes of ciphertext at `in` to `out`; false on failure.
  bool Decrypt(const char* in, size_t n, char* out);
  // Starts record `sequence_` whose header is at `header`.
  bool Begin(const char* header);
  // Checks the tag at `tag`.
  bool Finish(const char* tag);
  std::vector<char> whole_;  // a padded record's plaintext, opened again whole
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_TLS_RECORD_H_
