// Exchange frames (transport/wire_frame.h) over a TCP connection, beside
// gRPC: the PS's data path between hosts, inside TLS when the job has it.
//
// On the wire each frame is its length as 8 little-endian bytes followed by
// the frame's bytes, exactly the message gRPC would carry, so the same
// DecodedFrame parses it and the same ExchangeSession answers it. A frame is
// written with sendmsg straight from its slices (no copy in user space) and
// read with recv straight into one pooled buffer, which becomes the received
// ByteBuffer's only slice: the reader owns that memory and may rewrite the
// payload in place. Against gRPC this saves HTTP/2 framing and flow control,
// the hops between gRPC's threads, and the copy of a response out of gRPC's
// read slices.
//
// With TLS (StartTls, transport/frame_tls.h) the same frames travel inside
// TLS 1.3 records: the job's certificates and peer checks, as its gRPC
// channels have them. Where the kernel takes the connection's keys (kTLS),
// it seals and opens the records and frames go as over plain TCP. Where it
// does not, this process does, with OpenSSL's AES-GCM
// (transport/tls_record.h): a writer seals a frame's records into a buffer
// of up to kSealBatch bytes and sends them with one sendmsg; a reader
// receives what has arrived into its own buffer, up to kOpenBuffer bytes
// per recv, and opens each record straight into the frame's memory. The
// two directions have their own keys and state, so a reader and a writer
// run at once, as over plain TCP. Only a suite other than AES-GCM (a peer
// that offers ChaCha20-Poly1305 alone) leaves the records to OpenSSL's
// connection object: the socket is then non-blocking, and one OpenSSL call
// runs at a time, each moving at most 256 KiB, so a reader and a writer
// take turns.
//
// A FrameSocket has one reader and one writer at a time (two threads may use
// it, one each way). Shutdown() from any thread wakes both with an error.
#ifndef PSTRAIN_TRANSPORT_FRAME_SOCKET_H_
#define PSTRAIN_TRANSPORT_FRAME_SOCKET_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "transport/wire_frame.h"

struct ssl_st;

namespace pstrain {

class FrameTls;
class RecordOpener;
class RecordSealer;
struct TrafficSecrets;

// The send buffer frame sockets ask for: a frame of a few MiB then goes
// into the kernel without its writer sleeping until the reader has drained
// part of a smaller buffer, which saves wake-ups and context switches on
// both ends. With two PS and two workers, 4 MiB each way, the aggregate
// rose about 1.15x over the buffer Linux sizes by itself
// (docs/benchmarks/history.md).
inline constexpr int64_t kFrameSendBuffer = 4 << 20;

// The SO_SNDBUF value a frame socket sets on a host whose
// net.core.wmem_max and net.ipv4.tcp_wmem (its third value: the most Linux
// grows a send buffer to by itself) are as given: kFrameSendBuffer capped
// at wmem_max, or 0 (leave the kernel's own sizing) when that would not
// give a larger buffer than the kernel grows to, as on hosts where
// wmem_max keeps its default of 208 KiB.
int64_t FrameSendBufferRequest(int64_t wmem_max, int64_t tcp_wmem_max);

class FrameSocket {
 public:
  // Connects to host:port (a name or an address) within `timeout`.
  // Unavailable naming the address when it cannot.
  static absl::StatusOr<std::unique_ptr<FrameSocket>> Connect(const std::string& host, int port,
                                                              absl::Duration timeout);
  // Takes a connected TCP socket; `peer` names the other end in errors.
  FrameSocket(int fd, std::string peer);
  ~FrameSocket();  // closes the socket
  FrameSocket(const FrameSocket&) = delete;
  FrameSocket& operator=(const FrameSocket&) = delete;

  // Makes the connection TLS 1.3 with `tls`'s certificates, before any
  // frame, as the end `tls` serves: the server, which requires a client
  // certificate the job's CA signed, or a client of `host` (unused by a
  // server), whose certificate must name it (or tls.server_name()) and
  // chain to the CA. Within `timeout`. Unavailable
  // naming the peer and what the handshake found ("TLS handshake with
  // 127.0.0.1:4001 failed: its certificate: certificate has expired"), or
  // DeadlineExceeded. `tls` must outlive the socket.
  // Then, where tls.kernel_tls() and the kernel has TLS, hands it the
  // connection's keys (which direction it took: kernel_tls_send/receive).
  absl::Status StartTls(const FrameTls& tls, const std::string& host, absl::Duration timeout);
  bool tls() const { return ssl_ != nullptr; }
  bool kernel_tls_send() const { return kernel_tx_; }
  bool kernel_tls_receive() const { return kernel_rx_; }
  // What the frames travel in: "plain TCP", or the TLS version and suite
  // and who seals the records: "TLSv1.3 (TLS_AES_128_GCM_SHA256), records
  // sealed and opened by the kernel", or "..., records sealed by OpenSSL in
  // this process (this kernel has no TLS: module tls)" (its AES-GCM, in
  // this socket's records), or "..., records sealed by OpenSSL's TLS
  // connection in this process (why)".
  std::string DescribeTransport() const;

  // Writes one frame. Unavailable naming the peer when the connection
  // fails or was shut down.
  absl::Status Write(const grpc::ByteBuffer& frame);
  // Writes one frame of the `n` bytes at `data` (as Write of a buffer
  // holding them, without one).
  absl::Status WriteBytes(const void* data, size_t n);
  // Writes a frame header holding `mark` and no bytes after it: a signal
  // to a reader that knows the value (ReadLength returns it as it is, when
  // within its limit), as transport/ring.h's pieces and notices are.
  absl::Status WriteMark(uint64_t mark);

  // Reads one frame into a buffer from `pool`. OutOfRange when the peer
  // closed the connection between frames; DataLoss when it closed inside
  // one; InvalidArgument naming both sizes when the length is over
  // `max_bytes` (the connection is then unusable); Unavailable on other
  // socket errors or after Shutdown.
  absl::StatusOr<grpc::ByteBuffer> Read(BufferPool& pool, int64_t max_bytes);

  // Read in parts, for a reader that places a frame's bytes itself: the
  // next frame's length (errors as Read's), then exactly that many bytes
  // over one or more calls of ReadBytes / ReadScattered (DataLoss when the
  // peer closes first).
  absl::StatusOr<uint64_t> ReadLength(int64_t max_bytes);
  absl::Status ReadBytes(char* dst, size_t n) { return ReadExactly(dst, n, true); }
  // Fills each piece in order.
  absl::Status ReadScattered(std::vector<std::pair<char*, size_t>> pieces);

  // Bounds each later Read and Write to `timeout` of silence (DeadlineExceeded);
  // InfiniteDuration() removes the bound.
  void SetTimeout(absl::Duration timeout);

  // Whether the peer has closed or reset the connection (without reading).
  bool PeerGone() const;

  // Wakes a blocked Read or Write, which fail; every later one fails too.
  void Shutdown();

  const std::string& peer() const { return peer_; }
  // The socket's send buffer as the kernel reports it (-1 on error).
  int SendBufferBytes() const;

 private:
  absl::Status Error(const char* what, int err) const;
  // Sends (write) or receives every byte of `iov` (empty pieces dropped
  // here, for every path below).
  // `started` (reads) as ReadExactly's: whether a close before the first
  // byte is the end of the stream (OutOfRange) or inside a frame.
  absl::Status Transfer(std::vector<iovec> iov, bool write, bool started = true);
  // Transfer over the socket as it is: plain TCP, or records the kernel
  // seals and opens (or `iov` holds sealed records already). No piece of
  // `iov` is empty.
  absl::Status PlainTransfer(std::vector<iovec> iov, bool write, bool started);
  // Before a read of `bytes` (kLowWaterMin to kLowWaterMax): waits, up to
  // the socket's timeout, until they are all in, or the kernel says to
  // read now (its receive window is full, or the connection ended). True
  // when the socket is readable (false: the wait timed out).
  bool AwaitBytes(size_t bytes);
  static constexpr size_t kLowWaterMin = 64 << 10;
  static constexpr size_t kLowWaterMax = 2 << 20;
  // Reads exactly n bytes; `started` says whether a frame is under way (an
  // end of stream is then DataLoss, not OutOfRange).
  absl::Status ReadExactly(char* dst, size_t n, bool started);
  // A write through this process's records: seals `iov` into records of
  // up to kTlsMaxRecordData bytes (a piece may share a record with the
  // next), sending every kSealBatch bytes of them at once.
  absl::Status SealAndSend(const std::vector<iovec>& iov);
  static constexpr size_t kSealBatch = 256 << 10;
  // A read through this process's records: what the last record opened
  // left over first, then records from the socket opened into `iov`.
  absl::Status ReceiveAndOpen(std::vector<iovec> iov, bool started);
  static constexpr size_t kOpenBuffer = 512 << 10;
  // The error of a read that found `why` in the record stream.
  absl::Status RecordError(absl::string_view why) const;
  // The end of the stream on a read (`started` as ReadExactly's).
  absl::Status EndOfStream(bool started) const;
  // Transfer through OpenSSL's connection object: small pieces of a write
  // go out in one record.
  absl::Status TlsTransfer(std::vector<iovec> iov, bool write, bool started);
  // One SSL_read or SSL_write of up to `n` bytes, waiting on the socket
  // while OpenSSL wants it; the bytes moved, or the error.
  absl::StatusOr<size_t> TlsCall(char* data, size_t n, bool write, bool started);
  // Waits up to the socket's timeout for `events` (POLLIN, POLLOUT).
  absl::Status AwaitSocket(short events, const char* what);
  // After the handshake: gives the kernel the keys `secrets` yield, where
  // `tls` allows and the kernel has TLS, and makes this process's sealer
  // and opener for the directions it does not take. Who seals the records,
  // and why not the kernel when it does not (DescribeTransport's end).
  std::string ProtectRecords(const FrameTls& tls, const TrafficSecrets& secrets);
  // One recvmsg (EINTR retried). Where the kernel opens the records, a
  // record that is not application data is not frame bytes: the peer's
  // close_notify reads as the end of the stream (0); anything else, or a
  // record that fails its check, is -1 with errno EPROTO and the reason in
  // *record_error.
  ssize_t ReceiveOnce(msghdr* msg, int flags, std::string* record_error);
  // The kernel's close_notify, where it seals the records.
  void SendKernelCloseNotify();

  const int fd_;
  const std::string peer_;
  std::atomic<bool> shut_{false};
  std::atomic<int> timeout_ms_{-1};  // SetTimeout's, for poll (-1: none)
  ssl_st* ssl_ = nullptr;            // set once, by StartTls, before any frame
  absl::Mutex ssl_mu_;               // one OpenSSL call on ssl_ at a time
  // Set once by StartTls, before any frame: whether the kernel seals (tx)
  // and opens (rx) the records, and DescribeTransport's words for who does.
  bool kernel_tx_ = false;
  bool kernel_rx_ = false;
  std::string sealing_;
  // This process's records, where the kernel does not take a direction
  // (set once by StartTls). The sealer and its buffer are the writer's;
  // the opener, the received bytes not yet opened, and the data of the
  // last record opened that its read had no room for, the reader's.
  std::unique_ptr<RecordSealer> sealer_;
  std::vector<char> sealed_;
  std::unique_ptr<RecordOpener> opener_;
  std::vector<char> received_;
  size_t received_begin_ = 0, received_end_ = 0;
  std::vector<char> spill_;
  size_t spill_begin_ = 0, spill_end_ = 0;
};

// Why frame sockets on this host cannot hand TLS to the kernel (kTLS), or
// "" when they can: a connected loopback TCP socket takes the TLS
// upper-layer protocol (the kernel loads module tls for it, where tls is a
// module). For `pstrain describe`.
std::string KernelTlsMissing();

// A listening TCP socket for FrameSockets.
class FrameListener {
 public:
  // Binds `host` (an address of this host, or "0.0.0.0" / "::" for all) on
  // `port` (0: any free port). Unavailable naming the address when it
  // cannot.
  static absl::StatusOr<std::unique_ptr<FrameListener>> Listen(const std::string& host, int port);
  ~FrameListener();  // closes

  int port() const { return port_; }

  // Waits up to `timeout` for a connection: the connected socket, nullptr
  // when none came in time, or Unavailable when the listener is closed.
  absl::StatusOr<std::unique_ptr<FrameSocket>> Accept(absl::Duration timeout);

 private:
  FrameListener(int fd, int port) : fd_(fd), port_(port) {}
  const int fd_;
  const int port_;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_FRAME_SOCKET_H_
