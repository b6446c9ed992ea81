// Client end of one PS's Exchange stream (proto/ps_service.proto): frames go
// out in order, several may be in flight (pipelining), and each response is
// matched to its request. Tensor bytes are sent from the caller's memory
// without copying (BorrowSlice) and read from gRPC's received slices.
//
// With shared memory on (shared_bytes > 0), each stream first offers the PS a
// region of that size (common/shared_memory.h). Once the PS has mapped it,
// a request's payload is copied into the region instead of the frame, and a
// request whose header asks for shm_reply_capacity bytes of reply space gets
// that space there: the PS writes the pulled values into it, and `done` reads
// them in place. A request that does not fit in the free part of the region,
// and every request on a stream whose PS could not map it (another host),
// travels inline as before; callers see no difference but speed.
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
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/wire_frame.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.pb.h"

namespace pstrain::client {

class PsStream {
 public:
  // `name` prefixes errors: "ps:1 (127.0.0.1:4001)". `method` is the
  // stream's full gRPC method name (another service speaking Frames, such
  // as ps_bench's echo reference, may be named).
  PsStream(std::shared_ptr<grpc::Channel> channel, std::string name,
           std::string method = "/pstrain.v1.PsService/Exchange", int64_t shared_bytes = 0);
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
  void Send(v1::FrameHeader header, std::vector<grpc::Slice> payload, Done done)
      ABSL_LOCKS_EXCLUDED(mu_);

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

 private:
  class Reactor;
  friend class Reactor;

  const std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  const std::string name_;
  const std::string method_;
  const int64_t shared_bytes_;
  std::atomic<int64_t> shared_frames_{0};
  absl::Mutex mu_;
  // The open stream, if any, and every stream gRPC has not finished with.
  std::shared_ptr<Reactor> reactor_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Reactor>> reactors_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Streams not yet done (OnDone not run); separate from mu_ so OnDone never
  // waits for a sender.
  absl::Mutex live_mu_;
  int live_ ABSL_GUARDED_BY(live_mu_) = 0;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_PS_STREAM_H_
