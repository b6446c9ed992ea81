#include "transport/frame_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "transport/frame_tls.h"
#include "transport/security.h"
#include "transport/tls_record.h"

namespace pstrain {
namespace {

constexpr size_t kLengthBytes = 8;
// iovecs per sendmsg: well under every system's IOV_MAX.
constexpr size_t kMaxIov = 512;

std::string AddressText(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return absl::StrCat(host, ":", port);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return absl::StrCat("[", host, "]:", port);
}

// Moves past `n` bytes done of iov[*first...].
void Advance(size_t n, std::vector<iovec>& iov, size_t* first) {
  while (n > 0 && *first < iov.size()) {
    iovec& v = iov[*first];
    if (n >= v.iov_len) {
      n -= v.iov_len;
      ++*first;
    } else {
      v.iov_base = static_cast<char*>(v.iov_base) + n;
      v.iov_len -= n;
      n = 0;
    }
  }
}

// The integers in a /proc/sys file (empty when it cannot be read).
std::vector<int64_t> ReadSysctl(const char* path) {
  std::vector<int64_t> values;
  std::ifstream in(path);
  int64_t v = 0;
  while (in >> v) values.push_back(v);
  return values;
}

// This host's request for frame sockets' send buffers (FrameSendBufferRequest),
// read once.
int SendBufferRequest() {
  static const int request = [] {
    const std::vector<int64_t> core = ReadSysctl("/proc/sys/net/core/wmem_max");
    const std::vector<int64_t> tcp = ReadSysctl("/proc/sys/net/ipv4/tcp_wmem");
    if (core.empty() || tcp.size() < 3) return 0;
    return static_cast<int>(FrameSendBufferRequest(core[0], tcp[2]));
  }();
  return request;
}

void Configure(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (int bytes = SendBufferRequest(); bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  }
}

// One address of host:port for `flags` (AI_PASSIVE to bind).
absl::StatusOr<std::vector<addrinfo>> Resolve(const std::string& host, int port, int flags,
                                              std::vector<sockaddr_storage>* storage) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, ":", port, ": ", gai_strerror(rc)));
  }
  std::vector<addrinfo> out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) out.push_back(*a);
  storage->resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    std::memcpy(&(*storage)[i], out[i].ai_addr, out[i].ai_addrlen);
    out[i].ai_addr = reinterpret_cast<sockaddr*>(&(*storage)[i]);
    out[i].ai_next = nullptr;
  }
  freeaddrinfo(found);
  return out;
}

// The BIO under a frame socket's TLS: OpenSSL asks for a record's 5-byte
// header, then its body, so a socket BIO makes two read(2) calls per 16 KiB
// record (a 4 MiB frame: 512). This one receives up to kTlsReadAhead bytes
// per call into a buffer and serves OpenSSL's reads from it, and sends with
// MSG_NOSIGNAL (a reset connection is an error, not SIGPIPE). Non-blocking:
// an empty socket is a retry, which OpenSSL reports as WANT_READ/WRITE.
constexpr size_t kTlsReadAhead = 256 << 10;

struct SocketBioState {
  int fd;
  std::vector<char> buffer = std::vector<char>(kTlsReadAhead);
  size_t begin = 0, end = 0;
  // Off during the handshake: the socket then holds every byte after it,
  // for the kernel's TLS to open if it takes the connection.
  bool read_ahead = false;
};

int SocketBioRead(BIO* bio, char* out, int n) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (state->begin == state->end) {
    char* into = state->read_ahead ? state->buffer.data() : out;
    const size_t size = state->read_ahead ? state->buffer.size() : static_cast<size_t>(n);
    ssize_t r;
    do {
      r = recv(state->fd, into, size, MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
      return -1;
    }
    if (r == 0) return 0;
    if (!state->read_ahead) return static_cast<int>(r);
    state->begin = 0;
    state->end = static_cast<size_t>(r);
  }
  const size_t k = std::min(static_cast<size_t>(n), state->end - state->begin);
  std::memcpy(out, state->buffer.data() + state->begin, k);
  state->begin += k;
  return static_cast<int>(k);
}

int SocketBioWrite(BIO* bio, const char* in, int n) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  ssize_t r;
  do {
    r = send(state->fd, in, static_cast<size_t>(n), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
  return static_cast<int>(r);
}

long SocketBioCtrl(BIO* bio, int cmd, long, void*) {
  auto* state = static_cast<SocketBioState*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(state->end - state->begin);
    default:
      return 0;
  }
}

int SocketBioDestroy(BIO* bio) {
  delete static_cast<SocketBioState*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

BIO* NewSocketBio(int fd) {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "frame socket");
    BIO_meth_set_read(m, SocketBioRead);
    BIO_meth_set_write(m, SocketBioWrite);
    BIO_meth_set_ctrl(m, SocketBioCtrl);
    BIO_meth_set_destroy(m, SocketBioDestroy);
    return m;
  }();
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, new SocketBioState{fd});
  BIO_set_init(bio, 1);
  return bio;
}

SocketBioState* BioStateOf(SSL* ssl) {
  return static_cast<SocketBioState*>(BIO_get_data(SSL_get_rbio(ssl)));
}

// Gives the kernel one direction's keys (`direction`: TLS_TX or TLS_RX) for
// an AES-GCM suite (`Info`: linux/tls.h's tls12_crypto_info_aes_gcm_128 or
// _256, used for TLS 1.3 too). The 12-byte IV goes in as the kernel splits
// it: its first 4 bytes the salt, the last 8 the iv; the record sequence
// starts at 0, the first record under the application keys. The error
// text, or "".
template <typename Info>
std::string GiveKernelKeys(int fd, int direction, int cipher, const TrafficKeys& keys) {
  Info info{};
  static_assert(sizeof(info.salt) + sizeof(info.iv) == 12);
  if (keys.key.size() != sizeof(info.key) || keys.iv.size() != 12) return "keys of the wrong size";
  info.info.version = TLS_1_3_VERSION;
  info.info.cipher_type = static_cast<uint16_t>(cipher);
  std::memcpy(info.salt, keys.iv.data(), sizeof(info.salt));
  std::memcpy(info.iv, keys.iv.data() + sizeof(info.salt), sizeof(info.iv));
  std::memcpy(info.key, keys.key.data(), sizeof(info.key));
  const int r = setsockopt(fd, SOL_TLS, direction, &info, sizeof(info));
  const int err = errno;
  OPENSSL_cleanse(&info, sizeof(info));
  return r == 0 ? "" : std::strerror(err);
}

// Why TCP_ULP "tls" failed with `err`, as DescribeTransport says it.
std::string UlpRefusal(int err) {
  return err == ENOENT ? "this kernel has no TLS: module tls"
                       : absl::StrCat("TCP_ULP tls: ", std::strerror(err));
}

// The first `n` bytes of the `count` pieces at `iov`, in order (fewer when
// they hold fewer).
std::string FirstBytes(const iovec* iov, size_t count, size_t n) {
  std::string out;
  for (size_t i = 0; i < count && out.size() < n; ++i) {
    out.append(static_cast<const char*>(iov[i].iov_base), std::min(iov[i].iov_len, n - out.size()));
  }
  return out;
}

// A record of `type` (not application data) whose data begins with `body`:
// "" for the peer's close_notify, which ends the stream; else why it fails
// the connection (another alert, a handshake message).
std::string NotFrameBytes(unsigned char type, const std::string& body) {
  if (type == kTlsAlert && body.size() == 2) {
    if (body[1] == 0) return "";
    return absl::StrCat("it sent TLS alert ",
                        static_cast<int>(static_cast<unsigned char>(body[1])));
  }
  return absl::StrCat("it sent a TLS record of type ", static_cast<int>(type),
                      ", which frames do not use");
}

}  // namespace

absl::StatusOr<std::unique_ptr<FrameSocket>> FrameSocket::Connect(const std::string& host, int port,
                                                                  absl::Duration timeout) {
  std::vector<sockaddr_storage> storage;
  auto addresses = Resolve(host, port, 0, &storage);
  if (!addresses.ok()) return addresses.status();
  const absl::Time deadline = absl::Now() + timeout;
  std::string why = "no address";
  for (const addrinfo& a : *addresses) {
    const int fd = socket(a.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = connect(fd, a.ai_addr, a.ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
      rc = poll(&p, 1, ms);
      if (rc == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else if (rc == 0) {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    Configure(fd);
    return std::make_unique<FrameSocket>(fd, AddressText(a.ai_addr));
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port, ": ", why));
}

int64_t FrameSendBufferRequest(int64_t wmem_max, int64_t tcp_wmem_max) {
  const int64_t request = std::min(kFrameSendBuffer, wmem_max);
  // The kernel doubles a request (for its own bookkeeping); below the
  // autotuned size, a fixed buffer would only be smaller.
  return 2 * request > tcp_wmem_max ? request : 0;
}

int FrameSocket::SendBufferBytes() const {
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  if (getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0) return -1;
  return bytes;
}

FrameSocket::FrameSocket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

FrameSocket::~FrameSocket() {
  if (ssl_ != nullptr) {
    // One try to say close_notify, without waiting. Where the kernel or
    // this socket seals records, OpenSSL's own sequence is stale: the
    // alert goes as they seal it.
    if (kernel_tx_) {
      SendKernelCloseNotify();
    } else if (sealer_ != nullptr) {
      const unsigned char close_notify[2] = {1, 0};  // warning, close_notify
      iovec body{const_cast<unsigned char*>(close_notify), sizeof(close_notify)};
      char record[SealedRecordBytes(sizeof(close_notify))];
      absl::StatusOr<size_t> n = sealer_->Seal(kTlsAlert, &body, 1, sizeof(close_notify), record);
      if (n.ok()) send(fd_, record, *n, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      SSL_shutdown(ssl_);
    }
    SSL_free(ssl_);
  }
  close(fd_);
}

void FrameSocket::SendKernelCloseNotify() {
  unsigned char alert[2] = {1, 0};  // warning, close_notify
  iovec v{alert, sizeof(alert)};
  char control[CMSG_SPACE(sizeof(unsigned char))] = {};
  msghdr msg{};
  msg.msg_iov = &v;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_TLS;
  c->cmsg_type = TLS_SET_RECORD_TYPE;
  c->cmsg_len = CMSG_LEN(sizeof(unsigned char));
  *CMSG_DATA(c) = kTlsAlert;
  sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

absl::Status FrameSocket::StartTls(const FrameTls& tls, const std::string& host,
                                   absl::Duration timeout) {
  const bool server = tls.server();
  SSL* ssl = SSL_new(tls.context());
  BIO* bio = ssl == nullptr ? nullptr : NewSocketBio(fd_);
  if (ssl == nullptr || bio == nullptr) {
    SSL_free(ssl);
    return absl::InternalError(TakeTlsErrors("cannot make a TLS connection"));
  }
  SSL_set_bio(ssl, bio, bio);
  TrafficSecrets secrets;
  AttachTrafficSecrets(ssl, &secrets);
  if (!server) {
    const std::string& name = tls.server_name().empty() ? host : tls.server_name();
    in6_addr any;
    const bool ip =
        inet_pton(AF_INET, name.c_str(), &any) == 1 || inet_pton(AF_INET6, name.c_str(), &any) == 1;
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, name.c_str());
      SSL_set1_host(ssl, name.c_str());
    }
  }
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    ERR_clear_error();
    const int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) break;
    const int err = SSL_get_error(ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      pollfd p{fd_, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      int polled = ms > 0 ? poll(&p, 1, static_cast<int>(ms)) : 0;
      if (polled < 0 && errno == EINTR) continue;
      if (polled > 0) continue;
      SSL_free(ssl);
      return absl::DeadlineExceededError(absl::StrCat(
          "TLS handshake with ", peer_, ": no answer within ", absl::FormatDuration(timeout)));
    }
    // What went wrong, as precisely as OpenSSL says: the peer's
    // certificate (this side's check), or the alert the peer sent.
    const long verified = SSL_get_verify_result(ssl);
    std::string why = TakeTlsErrors(err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN
                                        ? "the peer closed the connection"
                                        : "unknown TLS error");
    if (verified != X509_V_OK) {
      why = absl::StrCat(
          "its certificate: ", X509_verify_cert_error_string(verified),
          CertificateErrorHint(verified, tls.server_name().empty() ? host : tls.server_name()));
    }
    SSL_free(ssl);
    return absl::UnavailableError(absl::StrCat("TLS handshake with ", peer_, " failed: ", why));
  }
  AttachTrafficSecrets(ssl, nullptr);
  ssl_ = ssl;
  sealing_ = ProtectRecords(tls, secrets);
  secrets.Wipe();
  if ((kernel_tx_ || sealer_ != nullptr) && (kernel_rx_ || opener_ != nullptr)) {
    // Frames then go as over plain TCP: blocking calls, timeouts from
    // SO_RCVTIMEO and SO_SNDTIMEO.
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  } else {
    // OpenSSL's connection moves the records: non-blocking, its BIO
    // reading ahead.
    BioStateOf(ssl_)->read_ahead = true;
  }
  return absl::OkStatus();
}

std::string FrameSocket::ProtectRecords(const FrameTls& tls, const TrafficSecrets& secrets) {
  const std::string openssl = "records sealed by OpenSSL's TLS connection in this process";
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl_);
  const uint32_t id = SSL_CIPHER_get_id(suite);
  if (id != TLS1_3_CK_AES_128_GCM_SHA256 && id != TLS1_3_CK_AES_256_GCM_SHA384) {
    return absl::StrCat(openssl, " (the kernel and this socket seal AES-GCM, not ",
                        SSL_CIPHER_get_name(suite), ")");
  }
  const bool aes128 = id == TLS1_3_CK_AES_128_GCM_SHA256;
  if (secrets.client.empty() || secrets.server.empty()) {
    return absl::StrCat(openssl, " (the handshake gave no traffic secrets)");
  }
  // Every byte after the handshake must still be in the socket, for the
  // kernel or this socket to open (the BIO read none ahead; OpenSSL keeps
  // none).
  const SocketBioState* bio = BioStateOf(ssl_);
  if (SSL_has_pending(ssl_) || bio->begin != bio->end) {
    return absl::StrCat(openssl, " (bytes after the handshake were read by it)");
  }
  const bool server = tls.server();
  const int key_bytes = aes128 ? 16 : 32;
  absl::StatusOr<TrafficKeys> send =
      DeriveTrafficKeys(server ? secrets.server : secrets.client, key_bytes);
  absl::StatusOr<TrafficKeys> receive =
      DeriveTrafficKeys(server ? secrets.client : secrets.server, key_bytes);
  if (!send.ok() || !receive.ok()) {
    return absl::StrCat(openssl, " (", (send.ok() ? receive : send).status().message(), ")");
  }
  // This socket's own for both directions first: a failure here leaves
  // the records to OpenSSL's connection before the kernel has any.
  absl::StatusOr<std::unique_ptr<RecordSealer>> sealer = RecordSealer::Make(*send);
  absl::StatusOr<std::unique_ptr<RecordOpener>> opener = RecordOpener::Make(*receive);
  if (!sealer.ok() || !opener.ok()) {
    return absl::StrCat(openssl, " (", (sealer.ok() ? opener.status() : sealer.status()).message(),
                        ")");
  }
  auto give = [&](int direction, const TrafficKeys& keys) {
    return aes128 ? GiveKernelKeys<tls12_crypto_info_aes_gcm_128>(fd_, direction,
                                                                  TLS_CIPHER_AES_GCM_128, keys)
                  : GiveKernelKeys<tls12_crypto_info_aes_gcm_256>(fd_, direction,
                                                                  TLS_CIPHER_AES_GCM_256, keys);
  };
  // Why the kernel does not seal, or open, the records.
  std::string not_sealing, not_opening = "as asked";
  if (!tls.kernel_tls()) {
    not_sealing = "--kernel_tls=false";
  } else if (setsockopt(fd_, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) != 0) {
    not_sealing = UlpRefusal(errno);
  } else if (std::string why = give(TLS_TX, *send); !why.empty()) {
    // Sending first: a kernel that takes neither leaves the socket as it was.
    not_sealing = absl::StrCat("the kernel refused the keys to send: ", why);
  } else {
    kernel_tx_ = true;
    if (tls.kernel_receives()) {
      not_opening = give(TLS_RX, *receive);
      if (not_opening.empty()) {
        kernel_rx_ = true;
      } else {
        not_opening = absl::StrCat("the kernel refused the keys to receive: ", not_opening);
      }
    }
  }
  if (!kernel_tx_) sealer_ = *std::move(sealer);
  if (!kernel_rx_) opener_ = *std::move(opener);
  if (kernel_rx_) return "records sealed and opened by the kernel";
  if (kernel_tx_) {
    return absl::StrCat("records sealed by the kernel, opened by OpenSSL in this process (",
                        not_opening, ")");
  }
  return absl::StrCat("records sealed by OpenSSL in this process (", not_sealing, ")");
}

std::string FrameSocket::DescribeTransport() const {
  if (ssl_ == nullptr) return "plain TCP";
  return absl::StrCat(SSL_get_version(ssl_), " (", SSL_get_cipher_name(ssl_), "), ", sealing_);
}

absl::Status FrameSocket::AwaitSocket(short events, const char* what) {
  pollfd p{fd_, events, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms_.load(std::memory_order_relaxed));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Error(what, errno);
  if (r == 0) return Error(what, EAGAIN);
  return absl::OkStatus();
}

absl::StatusOr<size_t> FrameSocket::TlsCall(char* data, size_t n, bool write, bool started) {
  const char* what = write ? "writing a frame to" : "reading a frame from";
  for (;;) {
    int r, err, call_errno;
    std::string failure;
    {
      absl::MutexLock lock(&ssl_mu_);
      ERR_clear_error();
      errno = 0;  // SSL_ERROR_SYSCALL means this call's errno, not an earlier one's
      r = write ? SSL_write(ssl_, data, static_cast<int>(n))
                : SSL_read(ssl_, data, static_cast<int>(n));
      call_errno = errno;
      err = r > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_SSL) failure = TakeTlsErrors("TLS error");
    }
    if (r > 0) return static_cast<size_t>(r);
    if (shut_.load(std::memory_order_acquire)) {
      return absl::UnavailableError(absl::StrCat("the connection to ", peer_, " was shut down"));
    }
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      absl::Status ready = AwaitSocket(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, what);
      if (!ready.ok()) return ready;
      continue;
    }
    if (err == SSL_ERROR_SYSCALL && call_errno != 0) return Error(what, call_errno);
    if (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL) {
      return write ? Error(what, EPIPE) : EndOfStream(started);
    }
    return absl::UnavailableError(absl::StrCat(what, " ", peer_, ": ", failure));
  }
}

absl::Status FrameSocket::TlsTransfer(std::vector<iovec> iov, bool write, bool started) {
  // One OpenSSL call's bytes at most: the other direction waits no longer.
  constexpr size_t kCall = 256 << 10;
  // Pieces of a write smaller than this are gathered into one record.
  constexpr size_t kGather = 16 << 10;
  std::string gathered;
  auto flush = [&]() -> absl::Status {
    size_t done = 0;
    while (done < gathered.size()) {
      absl::StatusOr<size_t> n =
          TlsCall(gathered.data() + done, gathered.size() - done, true, true);
      if (!n.ok()) return n.status();
      done += *n;
    }
    gathered.clear();
    return absl::OkStatus();
  };
  for (const iovec& v : iov) {
    char* p = static_cast<char*>(v.iov_base);
    size_t left = v.iov_len;
    if (write && left > 0 && gathered.size() + left <= kGather) {
      gathered.append(p, left);
      continue;
    }
    if (write && !gathered.empty()) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
    while (left > 0) {
      absl::StatusOr<size_t> n = TlsCall(p, std::min(left, kCall), write, started);
      if (!n.ok()) return n.status();
      p += *n;
      left -= *n;
      started = true;
    }
  }
  return write ? flush() : absl::OkStatus();
}

absl::Status FrameSocket::Error(const char* what, int err) const {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " ", peer_, ": no progress within the socket's timeout"));
  }
  return absl::UnavailableError(absl::StrCat(what, " ", peer_, ": ", std::strerror(err)));
}

ssize_t FrameSocket::ReceiveOnce(msghdr* msg, int flags, std::string* record_error) {
  char control[CMSG_SPACE(sizeof(unsigned char))];
  if (kernel_rx_) {
    msg->msg_control = control;
    msg->msg_controllen = sizeof(control);
  }
  ssize_t n;
  do {
    n = recvmsg(fd_, msg, flags);
  } while (n < 0 && errno == EINTR);
  if (!kernel_rx_) return n;
  if (n < 0) {
    if (errno == EBADMSG) {
      *record_error = "a TLS record failed its integrity check";
      errno = EPROTO;
    }
    return n;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_TLS || c->cmsg_type != TLS_GET_RECORD_TYPE) continue;
    const unsigned char type = *CMSG_DATA(c);
    if (type == kTlsApplicationData) break;
    // Not frame bytes: the end of the stream, or an error.
    *record_error = NotFrameBytes(type, FirstBytes(msg->msg_iov, msg->msg_iovlen,
                                                   std::min<size_t>(static_cast<size_t>(n), 2)));
    if (record_error->empty()) return 0;
    errno = EPROTO;
    return -1;
  }
  return n;
}

absl::Status FrameSocket::RecordError(absl::string_view why) const {
  return absl::UnavailableError(absl::StrCat("reading a frame from ", peer_, ": ", why));
}

absl::Status FrameSocket::EndOfStream(bool started) const {
  if (shut_.load(std::memory_order_acquire)) {
    return absl::UnavailableError(absl::StrCat("the connection to ", peer_, " was shut down"));
  }
  if (!started) return absl::OutOfRangeError(absl::StrCat(peer_, " closed the connection"));
  return absl::DataLossError(absl::StrCat(peer_, " closed the connection inside a frame"));
}

absl::Status FrameSocket::SealAndSend(const std::vector<iovec>& iov) {
  if (sealed_.empty()) sealed_.resize(kSealBatch + SealedRecordBytes(kTlsMaxRecordData));
  size_t filled = 0;
  auto flush = [&]() -> absl::Status {
    absl::Status sent = PlainTransfer({{sealed_.data(), filled}}, /*write=*/true, true);
    filled = 0;
    return sent;
  };
  // The pieces of the next record: up to kTlsMaxRecordData bytes from
  // iov[piece] at `offset` on.
  std::vector<iovec> record;
  size_t piece = 0, offset = 0;
  for (;;) {
    record.clear();
    size_t bytes = 0;
    while (piece < iov.size() && bytes < kTlsMaxRecordData) {
      const size_t take = std::min(iov[piece].iov_len - offset, kTlsMaxRecordData - bytes);
      if (take > 0) record.push_back({static_cast<char*>(iov[piece].iov_base) + offset, take});
      bytes += take;
      offset += take;
      if (offset == iov[piece].iov_len) {
        ++piece;
        offset = 0;
      }
    }
    if (bytes == 0) break;
    absl::StatusOr<size_t> n = sealer_->Seal(kTlsApplicationData, record.data(), record.size(),
                                             bytes, sealed_.data() + filled);
    if (!n.ok()) return n.status();
    filled += *n;
    if (filled >= kSealBatch) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
  }
  return filled > 0 ? flush() : absl::OkStatus();
}

absl::Status FrameSocket::ReceiveAndOpen(std::vector<iovec> iov, bool started) {
  if (received_.empty()) {
    received_.resize(kOpenBuffer + kTlsHeaderBytes + kTlsMaxCiphertext);
    spill_.resize(kTlsMaxRecordData);
  }
  size_t first = 0;
  while (first < iov.size()) {
    // What the last record opened had no room for.
    if (spill_begin_ < spill_end_) {
      size_t n = 0;
      for (size_t k = first; k < iov.size() && spill_begin_ + n < spill_end_; ++k) {
        const size_t take = std::min(iov[k].iov_len, spill_end_ - spill_begin_ - n);
        std::memcpy(iov[k].iov_base, spill_.data() + spill_begin_ + n, take);
        n += take;
      }
      spill_begin_ += n;
      Advance(n, iov, &first);
      started = true;
      continue;
    }
    // The next record, when all of it is in.
    const size_t have = received_end_ - received_begin_;
    const char* at = received_.data() + received_begin_;
    size_t record = 0;
    if (have >= kTlsHeaderBytes) {
      absl::StatusOr<size_t> bytes =
          RecordOpener::RecordBytes(reinterpret_cast<const unsigned char*>(at));
      if (!bytes.ok()) return RecordError(absl::StrCat("it sent ", bytes.status().message()));
      record = *bytes;
    }
    if (record > 0 && have >= record) {
      absl::StatusOr<RecordOpener::Opened> opened =
          opener_->Open(at, record, &iov[first], iov.size() - first, spill_.data());
      if (!opened.ok()) return RecordError(opened.status().message());
      received_begin_ += record;
      if (opened->type != kTlsApplicationData) {
        // Not frame bytes: the end of the stream, or an error. Its body
        // is where frame bytes would have gone.
        std::string body = FirstBytes(&iov[first], iov.size() - first, opened->placed);
        body.append(spill_.data(), opened->spilled);
        const std::string why = NotFrameBytes(opened->type, body);
        return why.empty() ? EndOfStream(started) : RecordError(why);
      }
      if (opened->placed + opened->spilled > 0) started = true;
      Advance(opened->placed, iov, &first);
      spill_begin_ = 0;
      spill_end_ = opened->spilled;
      continue;
    }
    // More bytes: after the part of a record already in, moved to the
    // front when the room behind it is short of a whole record.
    if (received_begin_ == received_end_) {
      received_begin_ = received_end_ = 0;
    } else if (received_.size() - received_end_ < kTlsHeaderBytes + kTlsMaxCiphertext) {
      std::memmove(received_.data(), at, have);
      received_begin_ = 0;
      received_end_ = have;
    }
    ssize_t n;
    do {
      n = recv(fd_, received_.data() + received_end_,
               std::min(kOpenBuffer, received_.size() - received_end_), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Error("reading a frame from", errno);
    if (n == 0) return EndOfStream(started || received_begin_ != received_end_);
    received_end_ += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FrameSocket::Transfer(std::vector<iovec> iov, bool write, bool started) {
  iov.erase(std::remove_if(iov.begin(), iov.end(), [](const iovec& v) { return v.iov_len == 0; }),
            iov.end());
  if (write && sealer_ != nullptr) return SealAndSend(iov);
  if (!write && opener_ != nullptr) return ReceiveAndOpen(std::move(iov), started);
  if (ssl_ != nullptr && !(write ? kernel_tx_ : kernel_rx_)) {
    return TlsTransfer(std::move(iov), write, started);
  }
  return PlainTransfer(std::move(iov), write, started);
}

absl::Status FrameSocket::PlainTransfer(std::vector<iovec> iov, bool write, bool started) {
  const char* what = write ? "writing a frame to" : "reading a frame from";
  size_t first = 0;
  while (first < iov.size()) {
    int read_flags = MSG_WAITALL;
    if (!write && !kernel_rx_) {
      size_t left = 0;
      for (size_t k = first; k < iov.size(); ++k) left += iov[k].iov_len;
      // Once they are in, take them without sleeping again.
      if (left >= kLowWaterMin && left <= kLowWaterMax && AwaitBytes(left)) {
        read_flags = MSG_DONTWAIT;
      }
    }
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = std::min(iov.size() - first, kMaxIov);
    std::string record_error;
    const ssize_t n =
        write ? sendmsg(fd_, &msg, MSG_NOSIGNAL) : ReceiveOnce(&msg, read_flags, &record_error);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && !write && read_flags == MSG_DONTWAIT) {
        continue;
      }
      if (!record_error.empty()) {
        return absl::UnavailableError(absl::StrCat(what, " ", peer_, ": ", record_error));
      }
      return Error(what, errno);
    }
    if (n == 0 && !write) return EndOfStream(started);
    started = true;
    Advance(static_cast<size_t>(n), iov, &first);
  }
  return absl::OkStatus();
}

absl::Status FrameSocket::Write(const grpc::ByteBuffer& frame) {
  std::vector<grpc::Slice> slices;
  if (frame.Valid()) {
    grpc::Status dumped = frame.Dump(&slices);
    if (!dumped.ok()) return absl::InternalError("cannot read the frame's slices");
  }
  unsigned char length[kLengthBytes];
  uint64_t n = frame.Valid() ? frame.Length() : 0;
  for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));
  std::vector<iovec> iov;
  iov.reserve(slices.size() + 1);
  iov.push_back({length, kLengthBytes});
  for (const grpc::Slice& s : slices) {
    if (s.size() > 0) iov.push_back({const_cast<uint8_t*>(s.begin()), s.size()});
  }
  return Transfer(std::move(iov), /*write=*/true);
}

absl::Status FrameSocket::WriteBytes(const void* data, size_t n) {
  unsigned char length[kLengthBytes];
  for (size_t i = 0; i < kLengthBytes; ++i) {
    length[i] = static_cast<unsigned char>(uint64_t{n} >> (8 * i));
  }
  std::vector<iovec> iov = {{length, kLengthBytes}};
  if (n > 0) iov.push_back({const_cast<void*>(data), n});
  return Transfer(std::move(iov), /*write=*/true);
}

absl::Status FrameSocket::WriteMark(uint64_t mark) {
  unsigned char length[kLengthBytes];
  for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<unsigned char>(mark >> (8 * i));
  return Transfer({{length, kLengthBytes}}, /*write=*/true);
}

absl::Status FrameSocket::ReadExactly(char* dst, size_t n, bool started) {
  return Transfer({{dst, n}}, /*write=*/false, started);
}

absl::StatusOr<uint64_t> FrameSocket::ReadLength(int64_t max_bytes) {
  unsigned char length[kLengthBytes];
  absl::Status s = ReadExactly(reinterpret_cast<char*>(length), kLengthBytes, false);
  if (!s.ok()) return s;
  uint64_t n = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) n |= uint64_t{length[i]} << (8 * i);
  if (n > static_cast<uint64_t>(max_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(peer_, " sent a frame of ", n, " bytes; the limit is ", max_bytes));
  }
  return n;
}

absl::Status FrameSocket::ReadScattered(std::vector<std::pair<char*, size_t>> pieces) {
  std::vector<iovec> iov;
  iov.reserve(pieces.size());
  for (const auto& [data, size] : pieces) {
    if (size > 0) iov.push_back({data, size});
  }
  return Transfer(std::move(iov), /*write=*/false);
}

absl::StatusOr<grpc::ByteBuffer> FrameSocket::Read(BufferPool& pool, int64_t max_bytes) {
  auto length = ReadLength(max_bytes);
  if (!length.ok()) return length.status();
  const uint64_t n = *length;
  if (n == 0) return grpc::ByteBuffer();
  BufferPool::Buffer buffer = pool.Acquire(n);
  absl::Status s = ReadExactly(buffer.data(), n, true);
  if (!s.ok()) return s;
  grpc::Slice slice = std::move(buffer).ToSlice();
  return grpc::ByteBuffer(&slice, 1);
}

// A blocking read of a payload is woken by every segment that arrives (on
// loopback a 1 MiB payload comes as a dozen or more), and each wake-up
// costs the sender too, which does it. With the socket's low-water mark
// (SO_RCVLOWAT) at the bytes awaited, the kernel signals the socket
// readable only once they are in (or when its receive window is full or
// the connection ended, so this never waits for bytes that cannot come):
// one poll, then one read that finds them all. The mark goes back to 1 at
// once, so that a small frame after still wakes a reader. Measured on the
// guide MLP's 1 MiB frames (a 1 PS + 1 worker cluster over TCP: 10-20%
// more steps per second); a larger payload is better copied while the rest
// arrives (4 MiB push-then-pulls lost a quarter of their rate waiting
// whole, and waking every 128 or 256 KiB lost more), so reads above
// kLowWaterMax wake as before.
bool FrameSocket::AwaitBytes(size_t bytes) {
  const int mark = static_cast<int>(std::min<size_t>(bytes, 1 << 30));
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof(mark)) != 0) return false;
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms_.load(std::memory_order_relaxed));
  } while (r < 0 && errno == EINTR);
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
  return r > 0;
}

void FrameSocket::SetTimeout(absl::Duration timeout) {
  timeval tv{};
  int ms = -1;
  if (timeout != absl::InfiniteDuration()) {
    tv = absl::ToTimeval(std::max(timeout, absl::Milliseconds(1)));
    ms = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(std::max(timeout, absl::Milliseconds(1))), int64_t{1} << 30));
  }
  timeout_ms_.store(ms, std::memory_order_relaxed);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool FrameSocket::PeerGone() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void FrameSocket::Shutdown() {
  shut_.store(true, std::memory_order_release);
  shutdown(fd_, SHUT_RDWR);
}

std::string KernelTlsMissing() {
  // A loopback connection of plain sockets: the protocol attaches only to
  // a connected TCP socket.
  const int listening = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(at);
  std::string why;
  int accepted = -1;
  if (listening < 0 || client < 0 ||
      bind(listening, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0 ||
      listen(listening, 1) != 0 ||
      getsockname(listening, reinterpret_cast<sockaddr*>(&at), &len) != 0 ||
      connect(client, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0 ||
      (accepted = accept(listening, nullptr, nullptr)) < 0) {
    why = absl::StrCat("no loopback connection to try it on: ", std::strerror(errno));
  } else if (setsockopt(client, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) != 0) {
    why = UlpRefusal(errno);
  }
  for (int fd : {accepted, client, listening}) {
    if (fd >= 0) close(fd);
  }
  return why;
}

absl::StatusOr<std::unique_ptr<FrameListener>> FrameListener::Listen(const std::string& host,
                                                                     int port) {
  std::vector<sockaddr_storage> storage;
  auto addresses = Resolve(host, port, AI_PASSIVE, &storage);
  if (!addresses.ok()) return addresses.status();
  std::string why = "no address";
  for (const addrinfo& a : *addresses) {
    const int fd = socket(a.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // A task started again binds its port while the connections of its
    // last run linger in TIME_WAIT there.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a.ai_addr, a.ai_addrlen) != 0 || listen(fd, 128) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    const int bound_port = bound.ss_family == AF_INET6
                               ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                               : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return std::unique_ptr<FrameListener>(new FrameListener(fd, bound_port));
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", why));
}

FrameListener::~FrameListener() { close(fd_); }

absl::StatusOr<std::unique_ptr<FrameSocket>> FrameListener::Accept(absl::Duration timeout) {
  pollfd p{fd_, POLLIN, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  const int rc = poll(&p, 1, ms);
  if (rc < 0 && errno != EINTR) {
    return absl::UnavailableError(absl::StrCat("frame listener: ", std::strerror(errno)));
  }
  if (rc <= 0) return nullptr;
  sockaddr_storage from{};
  socklen_t len = sizeof(from);
  const int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) return nullptr;
    return absl::UnavailableError(absl::StrCat("frame listener: ", std::strerror(errno)));
  }
  Configure(fd);
  return std::make_unique<FrameSocket>(fd, AddressText(reinterpret_cast<sockaddr*>(&from)));
}

}  // namespace pstrain
