// Client end of one PS's Exchange stream (proto/ps_service.proto): frames go
// out in order, several may be in flight (pipelining), and each response is
// matched to its request. Tensor bytes are sent from the caller's memory
// without copying (BorrowSlice) and read from gRPC's received slices.
//
// With shared memory on (shared_bytes > 0), each stream first offers the PS a
// region of that size (transport/shared_memory.h). Once the PS has mapped it,
// a request's payload is copied into the region instead of the frame, and a
// request whose header asks for shm_reply_capacity bytes of reply space gets
// that space there: the PS writes the pulled values into it, and `done` reads
// them in place. A request that does not fit in the free part of the region,
// and every request on a stream whose PS could not map it (another host),
// travels inline as before; callers see no difference but speed.
//
// Frames travel in a gRPC bidi stream, or, when the stream is given a TCP
// route and the PS offers a frame port (HealthResponse.frame_port), over a
// plain TCP connection to that port (transport/frame_socket.h): the same frames
// without HTTP/2, read straight into one buffer each. A PS that offers TCP
// but cannot be reached or refuses the hello is then spoken to in gRPC.
//
// The stream opens on first use and reopens after it breaks (PS restarted,
// connection lost): requests in flight when it breaks fail Unavailable; the
// next request starts a fresh stream. Call() bounds each request by a
// timeout and cancels the stream when it passes (the PS is then treated as
// lost, not waited for).
//
// Thread-safe.
#ifndef PSTRAIN_CLIENT_PS_STREAM_H_
#define PSTRAIN_CLIENT_PS_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/frame_socket.h"
#include "transport/frame_tls.h"
#include "transport/wire_frame.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.pb.h"

namespace pstrain::client {

// How to reach a PS's frame port: its host, a call asking the PS for the
// port (0 or NotFound: it has none), and the cluster token for the hello.
struct TcpRoute {
  std::string host;
  std::function<absl::StatusOr<int>()> port;
  std::string token;
  // The job's TLS: the connection is made TLS 1.3 (the PS's certificate
  // checked against the CA and `host`) before the hello. Null: plain TCP.
  std::shared_ptr<const FrameTls> tls;
};

// Caller memory a response's payload may be received into directly (over
// TCP), piece after piece: used only when the payload is exactly their
// total size; the response's frame then says delivered()
// (transport/wire_frame.h) and holds no payload of its own.
using ReplyInto = std::vector<std::pair<char*, int64_t>>;

class PsStream {
 public:
  // `name` prefixes errors: "ps:1 (127.0.0.1:4001)". `method` is the
  // stream's full gRPC method name (another service speaking Frames, such
  // as ps_bench's echo reference, may be named).
  PsStream(std::shared_ptr<grpc::Channel> channel, std::string name,
           std::string method = "/pstrain.v1.PsService/Exchange", int64_t shared_bytes = 0,
           std::optional<TcpRoute> tcp = std::nullopt);
  // Cancels the stream and waits for gRPC to let go of it.
  ~PsStream();
  PsStream(const PsStream&) = delete;
  PsStream& operator=(const PsStream&) = delete;

  // Runs with the response frame, or with the error (then frame is null):
  // a transport error, or the PS's answer when its header says code != 0,
  // as "<name>: Exchange: <message>". On a gRPC thread; must not block.
  using Done = std::function<void(const absl::Status& status, const DecodedFrame* frame)>;

  // Queues a request. `payload` slices that borrow memory must stay valid
  // until `done` runs. request_id is set here; with shared memory on, so are
  // the shm_* fields, shm_reply_capacity being the caller's hint of the bytes
  // the response's payload will have. With it off the header goes as given, and
  // a response's shm_reply is left to the caller.
  // `reply_into` (optional) is where the response's payload may land
  // without a copy; it must stay valid until `done` runs.
  void Send(v1::FrameHeader header, std::vector<grpc::Slice> payload, Done done,
            ReplyInto reply_into = {}) ABSL_LOCKS_EXCLUDED(mu_);

  // Sends and waits up to `timeout` for the response, then runs
  // `on_response` on it (on the calling thread). DeadlineExceeded naming the
  // PS when no answer comes in time (the stream is cancelled).
  absl::Status Call(v1::FrameHeader header, std::vector<grpc::Slice> payload,
                    absl::Duration timeout,
                    const std::function<absl::Status(const DecodedFrame&)>& on_response);

  // Fails everything in flight and closes the stream; the next Send opens a
  // new one.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& name() const { return name_; }

  // Requests sent so far whose payload or reply went through shared memory.
  int64_t shared_frames() const { return shared_frames_.load(std::memory_order_relaxed); }

  // Whether the stream last opened carries its frames over TCP.
  bool over_tcp() const { return over_tcp_.load(std::memory_order_relaxed); }
  // ... and inside TLS (TcpRoute::tls).
  bool over_tls() const { return over_tls_.load(std::memory_order_relaxed); }
  // ... with this end's records sealed and opened by the kernel (kTLS).
  bool over_kernel_tls() const { return over_kernel_tls_.load(std::memory_order_relaxed); }

  // Whether the PS mapped the shared memory of the stream last opened: its
  // requests' tensor bytes then go through it when they fit.
  bool shares_memory() const { return shares_memory_.load(std::memory_order_relaxed); }

 private:
  class Connection;
  class GrpcConnection;
  class TcpConnection;

  // How long connecting to the frame port and its hello may take.
  static constexpr absl::Duration kTcpTimeout = absl::Seconds(5);

  // A new connection: over TCP when the route allows, else gRPC.
  std::shared_ptr<Connection> OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connects to the PS's frame port and says hello. NotFound when the PS
  // offers none (or cannot say now).
  absl::StatusOr<std::unique_ptr<FrameSocket>> ConnectTcp();

  const std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  const std::string name_;
  const std::string method_;
  const int64_t shared_bytes_;
  const std::optional<TcpRoute> tcp_;
  // Buffers that TCP responses are read into.
  const std::shared_ptr<BufferPool> pool_;
  std::atomic<int64_t> shared_frames_{0};
  std::atomic<bool> over_tcp_{false};
  std::atomic<bool> over_tls_{false};
  std::atomic<bool> over_kernel_tls_{false};
  std::atomic<bool> shares_memory_{false};
  absl::Mutex mu_;
  // The PS offered TCP but could not be reached so: gRPC from then on.
  bool tcp_refused_ ABSL_GUARDED_BY(mu_) = false;
  // The open stream, if any, and every stream not yet finished with.
  std::shared_ptr<Connection> reactor_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Connection>> reactors_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Streams not yet done (OnDone not run); separate from mu_ so OnDone never
  // waits for a sender.
  absl::Mutex live_mu_;
  int live_ ABSL_GUARDED_BY(live_mu_) = 0;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_PS_STREAM_H_
