#include "transport/frame_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

FrameSocket::~FrameSocket() { close(fd_); }

absl::Status FrameSocket::Error(const char* what, int err) const {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " ", peer_, ": no progress within the socket's timeout"));
  }
  return absl::UnavailableError(absl::StrCat(what, " ", peer_, ": ", std::strerror(err)));
}

absl::Status FrameSocket::Transfer(std::vector<iovec> iov, bool write) {
  iov.erase(std::remove_if(iov.begin(), iov.end(), [](const iovec& v) { return v.iov_len == 0; }),
            iov.end());
  size_t first = 0;
  while (first < iov.size()) {
    int read_flags = MSG_WAITALL;
    if (!write) {
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
    const ssize_t n = write ? sendmsg(fd_, &msg, MSG_NOSIGNAL) : recvmsg(fd_, &msg, read_flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!write && read_flags == MSG_DONTWAIT && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      return Error(write ? "writing a frame to" : "reading a frame from", errno);
    }
    if (n == 0 && !write) {
      if (shut_.load(std::memory_order_acquire)) {
        return absl::UnavailableError(absl::StrCat("the connection to ", peer_, " was shut down"));
      }
      return absl::DataLossError(absl::StrCat(peer_, " closed the connection inside a frame"));
    }
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
  for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<unsigned char>(uint64_t{n} >> (8 * i));
  std::vector<iovec> iov = {{length, kLengthBytes}};
  if (n > 0) iov.push_back({const_cast<void*>(data), n});
  return Transfer(std::move(iov), /*write=*/true);
}

absl::Status FrameSocket::ReadExactly(char* dst, size_t n, bool started) {
  size_t got = 0;
  if (!started && n > 0) {
    // A close before the first byte ends the stream between frames.
    ssize_t r;
    do {
      r = recv(fd_, dst, n, 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return Error("reading a frame from", errno);
    if (r == 0) {
      if (shut_.load(std::memory_order_acquire)) {
        return absl::UnavailableError(absl::StrCat("the connection to ", peer_, " was shut down"));
      }
      return absl::OutOfRangeError(absl::StrCat(peer_, " closed the connection"));
    }
    got = static_cast<size_t>(r);
  }
  return Transfer({{dst + got, n - got}}, /*write=*/false);
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
