#include "ps_server/ps_service.h"

#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "transport/grpc_status.h"
#include "base/logging.h"
#include "base/process_stats.h"
#include "base/status_macros.h"
#include "ps_server/exchange_session.h"

namespace pstrain::ps {
namespace {

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// The transport of one Exchange stream: reads frames, hands each to its
// ExchangeSession (the frame logic), and writes the answers in order. The
// next read starts once the current frame's answer is queued, so a parked
// pull holds back only its own stream. Deletes itself in OnDone, which gRPC
// calls only after Finish, and Finish waits until no pull is parked (no
// read is outstanding while one is).
class ExchangeReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Pushes held by a checkpoint wait on `held_pushes`.
  ExchangeReactor(ShardStore* store, std::shared_ptr<BufferPool> pool, const ExchangeLimits& limits,
                  CallGuard::Admission admission, SerialWorker* held_pushes)
      : admission_(std::move(admission)),
        session_(
            store, std::move(pool), limits,
            [this](grpc::ByteBuffer answer) { Respond(std::move(answer)); },
            [held_pushes](std::function<void()> task) { held_pushes->Run(std::move(task)); }) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    // Taken out of in_ first: the answer may start the next read into it.
    grpc::ByteBuffer received;
    received.Swap(&in_);
    session_.Handle(received);
  }

  void OnWriteDone(bool ok) override {
    bool resume_reading = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      // Lets go of the payload now: an answer sent from a tensor's own
      // values holds it from being written in place until then.
      out_.Clear();
      if (!ok) {
        // The call is gone; drop what is queued.
        broken_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
      WriteNextLocked();
      if (read_paused_ && queued_bytes_ < kMaxQueuedBytes) {
        read_paused_ = false;
        resume_reading = true;
      }
      MaybeFinishLocked();
    }
    if (resume_reading) StartRead(&in_);
  }

  void OnCancel() override { session_.Cancel(); }

  void OnDone() override { delete this; }

 private:
  // Queues the answer to the current frame and reads the next one, unless
  // answers are piling up unsent: then reading waits for writes to drain,
  // so a client pipelining many large frames cannot make this PS buffer
  // them all (flow control holds them back in the client instead).
  void Respond(grpc::ByteBuffer frame) {
    {
      absl::MutexLock lock(&mu_);
      if (!broken_) {
        queued_bytes_ += frame.Length();
        queue_.push_back(std::move(frame));
      }
      WriteNextLocked();
      if (queued_bytes_ >= kMaxQueuedBytes) {
        read_paused_ = true;
        return;
      }
    }
    StartRead(&in_);
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queue_.empty()) return;
    writing_ = true;
    out_ = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= out_.Length();
    StartWrite(&out_);
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || writing_ || !queue_.empty()) return;
    finished_ = true;
    Finish(grpc::Status::OK);
  }

  // Bytes of answers queued behind the one being written at which reading
  // pauses: one large pull's worth (small push acknowledgements never stop
  // a pipelining client).
  static constexpr size_t kMaxQueuedBytes = 4 << 20;

  // Holds this stream's place among the calls in flight until OnDone.
  const CallGuard::Admission admission_;
  grpc::ByteBuffer in_;
  ExchangeSession session_;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Ends a stream that was not admitted, with the reason.
class RefusedExchange final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedExchange(const absl::Status& why) { Finish(ToGrpcStatus(why)); }
  void OnDone() override { delete this; }
};

}  // namespace

PsServiceImpl::PsServiceImpl(ShardStore* store, OnShutdown on_shutdown, PsServiceOptions options)
    : store_(store),
      on_shutdown_(std::move(on_shutdown)),
      options_(options),
      // Idle response buffers kept for reuse: a few frames' worth.
      pool_(BufferPool::Create(16 << 20)),
      guard_(options.security, options.calls),
      control_(store, {options.env}) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsServiceImpl::Exchange(
    grpc::CallbackServerContext* ctx) {
  auto admitted = guard_.Admit(*ctx, "Exchange");
  if (!admitted.ok()) return new RefusedExchange(admitted.status());
  return new ExchangeReactor(store_, pool_, Limits(), *std::move(admitted), &held_pushes_);
}

ExchangeLimits PsServiceImpl::Limits() const {
  ExchangeLimits limits;
  limits.wait_timeout = options_.wait_timeout;
  limits.max_tensors = options_.max_tensors_per_request;
  limits.max_ids = options_.max_ids_per_request;
  limits.shared_memory = options_.shared_memory;
  limits.max_shared_bytes = options_.max_shared_region_bytes;
  return limits;
}

PsServiceImpl::~PsServiceImpl() = default;

void PsServiceImpl::StopServingFrames() {
  frame_port_.store(0, std::memory_order_release);
  frames_.reset();
}

absl::StatusOr<int> PsServiceImpl::ServeFramesOverTcp(const std::string& host,
                                                      int64_t max_frame_bytes) {
  FrameServerOptions options;
  options.host = host;
  options.limits = Limits();
  options.max_frame_bytes = max_frame_bytes;
  if (options_.security != nullptr && options_.security->tls()) {
    absl::StatusOr<std::shared_ptr<const FrameTls>> tls = FrameTls::Make(*options_.security, FrameTls::Side::kServer);
    if (!tls.ok()) return tls.status();
    options.tls = *std::move(tls);
  }
  auto started = FrameServer::Start(store_, pool_, &guard_, std::move(options));
  if (!started.ok()) return started.status();
  frames_ = *std::move(started);
  frame_port_.store(frames_->port(), std::memory_order_release);
  return frames_->port();
}

grpc::ServerUnaryReactor* PsServiceImpl::CreateVariables(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateVariablesRequest* req,
                                                         v1::CreateVariablesResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "CreateVariables");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  absl::StatusOr<v1::CreateVariablesResponse> created = control_.CreateVariables(*req);
  if (created.ok()) *resp = *std::move(created);
  return FinishWith(ctx, created.status());
}

grpc::ServerUnaryReactor* PsServiceImpl::Restore(grpc::CallbackServerContext* ctx,
                                                 const v1::RestoreRequest* req,
                                                 v1::RestoreResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Restore");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  absl::StatusOr<v1::RestoreResponse> restored = control_.Restore(*req);
  if (restored.ok()) *resp = *std::move(restored);
  return FinishWith(ctx, restored.status());
}

grpc::ServerUnaryReactor* PsServiceImpl::HoldPushes(grpc::CallbackServerContext* ctx,
                                                    const v1::HoldPushesRequest* req,
                                                    v1::HoldPushesResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "HoldPushes");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->lease_ms() == 0) {
    absl::StatusOr<v1::HoldPushesResponse> released = control_.HoldPushes(*req);
    if (released.ok()) *resp = *std::move(released);
    return FinishWith(ctx, released.status());
  }
  // Waiting for the pushes being applied to finish must not take a gRPC
  // thread: it runs on the checkpoint thread, as saves do.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto admission = std::make_shared<CallGuard::Admission>(*std::move(admitted));
  checkpoint_writer_.Run([this, req, resp, reactor, admission] {
    absl::StatusOr<v1::HoldPushesResponse> held = control_.HoldPushes(*req);
    if (held.ok()) *resp = *std::move(held);
    reactor->Finish(ToGrpcStatus(held.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                                        const v1::SaveCheckpointRequest* req,
                                                        v1::SaveCheckpointResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "SaveCheckpoint");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  // The snapshot and the write run on the checkpoint thread; this gRPC
  // thread returns at once, and the call is answered from there.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto admission = std::make_shared<CallGuard::Admission>(*std::move(admitted));
  checkpoint_writer_.Run([this, req, resp, reactor, admission] {
    absl::StatusOr<v1::SaveCheckpointResponse> saved = control_.SaveCheckpoint(*req);
    if (saved.ok()) *resp = *std::move(saved);
    reactor->Finish(ToGrpcStatus(saved.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::Health(grpc::CallbackServerContext* ctx,
                                                const v1::HealthRequest* req,
                                                v1::HealthResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Health");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  last_health_micros_.store(absl::ToUnixMicros(absl::Now()), std::memory_order_relaxed);
  *resp = control_.Health();
  resp->set_frame_port(frame_port_.load(std::memory_order_acquire));
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Stats(grpc::CallbackServerContext* ctx,
                                               const v1::StatsRequest* req,
                                               v1::StatsResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Stats");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  *resp = control_.Stats();
  resp->set_resident_bytes(ResidentBytes().value_or(0));
  resp->set_refused_unauthenticated(guard_.unauthenticated());
  resp->set_refused_over_limit(guard_.over_limit());
  resp->set_calls_in_flight(guard_.in_flight());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Shutdown(grpc::CallbackServerContext* ctx,
                                                  const v1::ShutdownRequest* req,
                                                  v1::ShutdownResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Shutdown");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  grpc::ServerUnaryReactor* reactor = FinishWith(ctx, absl::OkStatus());
  on_shutdown_(req->reason(), req->exit_code());
  return reactor;
}

}  // namespace pstrain::ps
