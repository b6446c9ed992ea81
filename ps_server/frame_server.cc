#include "ps_server/frame_server.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/logging.h"

namespace pstrain::ps {
namespace {

constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
// How often a thread waiting for a parked pull's answer checks its
// connection and the server's stop.
constexpr absl::Duration kWatchInterval = absl::Milliseconds(100);

}  // namespace

absl::StatusOr<std::unique_ptr<FrameServer>> FrameServer::Start(ShardStore* store,
                                                                std::shared_ptr<BufferPool> pool,
                                                                CallGuard* guard,
                                                                FrameServerOptions options) {
  auto listener = FrameListener::Listen(options.host, 0);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<FrameServer>(
      new FrameServer(store, std::move(pool), guard, std::move(options), *std::move(listener)));
}

FrameServer::FrameServer(ShardStore* store, std::shared_ptr<BufferPool> pool, CallGuard* guard,
                         FrameServerOptions options, std::unique_ptr<FrameListener> listener)
    : store_(store),
      pool_(std::move(pool)),
      guard_(guard),
      options_(std::move(options)),
      listener_(std::move(listener)) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FrameServer::~FrameServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  acceptor_.join();
  std::list<Connection> all;
  {
    absl::MutexLock lock(&mu_);
    for (Connection& c : connections_) c.socket->Shutdown();
    all.swap(connections_);
  }
  for (Connection& c : all) c.thread.join();
}

void FrameServer::AcceptLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      ReapLocked();
    }
    auto accepted = listener_->Accept(kWatchInterval);
    if (!accepted.ok()) {
      Log("frames over TCP: ", accepted.status().message());
      absl::SleepFor(kWatchInterval);
      continue;
    }
    if (*accepted == nullptr) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (unadmitted_ >= options_.max_unadmitted) continue;  // closed on leaving scope
    ++unadmitted_;
    connections_.emplace_back();
    Connection* c = &connections_.back();
    c->socket = *std::move(accepted);
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void FrameServer::ReapLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<CallGuard::Admission> FrameServer::Hello(FrameSocket& socket) {
  socket.SetTimeout(kHelloTimeout);
  // A hello is small: a large first frame is not one.
  auto in = socket.Read(*pool_, 64 << 10);
  if (!in.ok()) return in.status();
  DecodedFrame hello;
  absl::Status parsed = hello.Parse(*in);
  if (!parsed.ok()) return parsed;
  if (!hello.header().tcp_hello()) {
    return absl::InvalidArgumentError("the connection's first frame is not a hello");
  }
  auto admitted = guard_->Admit(hello.header().tcp_token(), socket.peer(), "Exchange (TCP)");
  socket.SetTimeout(absl::InfiniteDuration());
  return admitted;
}

void FrameServer::Serve(Connection* c) {
  FrameSocket& socket = *c->socket;
  std::optional<CallGuard::Admission> admission;
  {
    absl::Status secured = options_.tls == nullptr
                               ? absl::OkStatus()
                               : socket.StartTls(*options_.tls, "", kHelloTimeout);
    if (!secured.ok()) {
      // Nothing can be said to a peer that does not speak the job's TLS.
      Log("frames over TCP: ", secured.message(), "; closing the connection");
      absl::MutexLock lock(&mu_);
      --unadmitted_;
      c->done = true;
      return;
    }
    auto admitted = Hello(socket);
    absl::Status answered;
    if (admitted.ok()) {
      admission.emplace(*std::move(admitted));
      v1::FrameHeader ok;
      ok.set_tcp_hello(true);
      answered = socket.Write(EncodeFrame(ok, {}));
    } else {
      // The refusal is said, then the connection closes.
      (void)socket.Write(ErrorFrame(0, admitted.status()));
    }
    absl::MutexLock lock(&mu_);
    --unadmitted_;
    if (!admitted.ok() || !answered.ok()) {
      c->done = true;
      return;
    }
  }
  // The answer to the frame being handled, given by the session on this
  // thread or on the one that readies a parked pull.
  absl::Mutex answer_mu;
  std::optional<grpc::ByteBuffer> answer;
  ExchangeSession session(store_, pool_, options_.limits, [&](grpc::ByteBuffer frame) {
    absl::MutexLock lock(&answer_mu);
    answer = std::move(frame);
  });
  for (;;) {
    auto in = socket.Read(*pool_, options_.max_frame_bytes);
    if (!in.ok()) {
      if (in.status().code() != absl::StatusCode::kOutOfRange &&
          in.status().code() != absl::StatusCode::kUnavailable) {
        Log("frames over TCP: ", in.status().message(), "; closing the connection");
      }
      break;
    }
    session.Handle(*in);
    *in = grpc::ByteBuffer();
    grpc::ByteBuffer out;
    {
      absl::MutexLock lock(&answer_mu);
      bool cancelled = false;
      while (!answer_mu.AwaitWithTimeout(
          absl::Condition(
              +[](std::optional<grpc::ByteBuffer>* a) { return a->has_value(); }, &answer),
          kWatchInterval)) {
        if (cancelled) continue;
        answer_mu.Unlock();
        bool stop = socket.PeerGone();
        if (!stop) {
          absl::MutexLock server_lock(&mu_);
          stop = stopping_;
        }
        if (stop) {
          session.Cancel();
          cancelled = true;
        }
        answer_mu.Lock();
      }
      out = std::move(*answer);
      answer.reset();
    }
    if (!socket.Write(out).ok()) break;
  }
  absl::MutexLock lock(&mu_);
  c->done = true;
}

}  // namespace pstrain::ps
