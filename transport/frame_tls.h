// TLS for frame sockets (transport/frame_socket.h) with a job's certificates
// (transport/security.h), the same peer checks as the gRPC channel's: TLS
// 1.3 only, the server requires a client certificate that the job's CA
// signed, and a client checks the server's certificate against the CA and
// the name it dials (or tls_server_name). Session tickets are off (every
// connection is a full handshake between tasks that stay connected).
// AES-128-GCM first, with the CPU's AES instructions.
//
// After the handshake a frame socket hands the connection's keys to the
// kernel's TLS (kTLS: TCP_ULP "tls", then TLS_TX and TLS_RX) where the host
// has it and Security::kernel_tls() allows: records are then sealed and
// opened in the kernel (by the NIC where it offloads TLS), and frames go
// through plain sendmsg and recvmsg. Elsewhere the frame socket seals and
// opens them itself with OpenSSL's AES-GCM (transport/tls_record.h), and
// only a suite other than AES-GCM leaves them to OpenSSL's connection. The
// keys come from OpenSSL's key log callback, which a context made here
// installs for that purpose; they live in the connection's TrafficSecrets
// until the kernel or the socket's own records have them, and are then
// wiped.
// Immutable and thread-safe once made.
#ifndef PSTRAIN_TRANSPORT_FRAME_TLS_H_
#define PSTRAIN_TRANSPORT_FRAME_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/security.h"

struct ssl_ctx_st;
struct ssl_st;

namespace pstrain {

class FrameTls {
 public:
  // Which end of connections it serves: a server (the PS's frame port) or a
  // client (a worker dialling it).
  enum class Side { kServer, kClient };
  // InvalidArgument when `security` has no TLS, or naming what OpenSSL
  // refused in its PEMs. `kernel_receives`: where the kernel takes the
  // keys, it opens the records as well as sealing them; false (for tests)
  // leaves the opening to the process, as a kernel that takes only the
  // keys to send does. `suites` (for tests): the TLS 1.3 suites offered,
  // in OpenSSL's syntax, instead of the default list.
  static absl::StatusOr<std::shared_ptr<const FrameTls>> Make(const Security& security, Side side,
                                                              bool kernel_receives = true,
                                                              const std::string& suites = "");
  ~FrameTls();
  FrameTls(const FrameTls&) = delete;
  FrameTls& operator=(const FrameTls&) = delete;

  bool server() const { return side_ == Side::kServer; }
  ssl_ctx_st* context() const { return context_; }
  // The name a server's certificate must carry; empty: the host dialled.
  const std::string& server_name() const { return server_name_; }
  // Whether connections try the kernel's TLS (Security::kernel_tls()), and
  // give it the keys to receive too.
  bool kernel_tls() const { return kernel_tls_; }
  bool kernel_receives() const { return kernel_receives_; }

 private:
  explicit FrameTls(Side side) : side_(side) {}
  const Side side_;
  ssl_ctx_st* context_ = nullptr;
  std::string server_name_;
  bool kernel_tls_ = false;
  bool kernel_receives_ = true;
};

// The application traffic secrets of one TLS 1.3 connection (RFC 8446
// 7.1), as its handshake derives them, for the kernel's TLS or the frame
// socket's own records. A connection of a context made here fills the one
// attached to it (AttachTrafficSecrets) during its handshake. Wiped when
// destroyed.
struct TrafficSecrets {
  std::string client, server;  // raw bytes; empty until derived
  ~TrafficSecrets();
  void Wipe();
};
// Lets `ssl`'s handshake fill `secrets` (which must outlive it, or be
// detached with nullptr first).
void AttachTrafficSecrets(ssl_st* ssl, TrafficSecrets* secrets);

// One direction's record protection key and IV (RFC 8446 7.3) from its
// traffic secret: HKDF-Expand-Label(secret, "key" / "iv", "", length) with
// the suite's hash, SHA-256 for a secret of 32 bytes and SHA-384 for 48
// (TLS_AES_128_GCM_SHA256: a key of 16 bytes; TLS_AES_256_GCM_SHA384: 32).
// The record with sequence number s is sealed under nonce iv XOR s (s
// big-endian in the last 8 bytes).
struct TrafficKeys {
  std::string key;  // 16 or 32 bytes
  std::string iv;   // 12 bytes
  ~TrafficKeys();
};
// InvalidArgument for a secret that is not 32 or 48 bytes or a key_bytes
// other than 16 or 32; Internal when OpenSSL fails.
absl::StatusOr<TrafficKeys> DeriveTrafficKeys(absl::string_view secret, int key_bytes);

// OpenSSL's queued errors as one line (clearing them), or `otherwise`.
std::string TakeTlsErrors(const std::string& otherwise);

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_FRAME_TLS_H_
