// TLS for frame sockets (transport/frame_socket.h) with a job's certificates
// (transport/security.h), the same peer checks as the gRPC channel's: TLS
// 1.3 only, the server requires a client certificate that the job's CA
// signed, and a client checks the server's certificate against the CA and
// the name it dials (or tls_server_name). Session tickets are off (every
// connection is a full handshake between tasks that stay connected).
// Records are sealed by OpenSSL in user space (AES-128-GCM first, with the
// CPU's AES instructions). Immutable and thread-safe once made.
#ifndef PSTRAIN_TRANSPORT_FRAME_TLS_H_
#define PSTRAIN_TRANSPORT_FRAME_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/security.h"

struct ssl_ctx_st;

namespace pstrain {

class FrameTls {
 public:
  // Which end of connections it serves: a server (the PS's frame port) or a
  // client (a worker dialling it).
  enum class Side { kServer, kClient };
  // InvalidArgument when `security` has no TLS, or naming what OpenSSL
  // refused in its PEMs.
  static absl::StatusOr<std::shared_ptr<const FrameTls>> Make(const Security& security, Side side);
  ~FrameTls();
  FrameTls(const FrameTls&) = delete;
  FrameTls& operator=(const FrameTls&) = delete;

  bool server() const { return side_ == Side::kServer; }
  ssl_ctx_st* context() const { return context_; }
  // The name a server's certificate must carry; empty: the host dialled.
  const std::string& server_name() const { return server_name_; }

 private:
  explicit FrameTls(Side side) : side_(side) {}
  const Side side_;
  ssl_ctx_st* context_ = nullptr;
  std::string server_name_;
};

// OpenSSL's queued errors as one line (clearing them), or `otherwise`.
std::string TakeTlsErrors(const std::string& otherwise);

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_FRAME_TLS_H_
