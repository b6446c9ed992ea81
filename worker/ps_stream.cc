#include "worker/ps_stream.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"

namespace pstrain::worker {

class PsStream::Reactor final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Reactor(PsStream* owner) : owner_(owner) {
    owner_->stub_.PrepareBidiStreamingCall(&ctx_, owner_->method_, grpc::StubOptions(), this);
    StartRead(&in_);
    StartCall();
  }

  bool broken() {
    absl::MutexLock lock(&mu_);
    return broken_;
  }

  // False when the stream is already broken (the caller picks another);
  // `ended` then holds the status it ended with, if it has. A `fresh`
  // stream (opened for this request) that broke but has not ended yet takes
  // the request anyway, which then fails with the status the stream ends
  // with: the server's reason for refusing the call.
  bool Enqueue(uint64_t id, grpc::ByteBuffer frame, Done done, bool fresh,
               absl::Status* ended) {
    absl::MutexLock lock(&mu_);
    if (ended_) *ended = final_;
    if (broken_ && fresh && !ended_) {
      pending_.push_back({id, std::move(done)});
      return true;
    }
    if (broken_) return false;
    pending_.push_back({id, std::move(done)});
    writes_.push_back(std::move(frame));
    WriteNextLocked();
    return true;
  }

  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      broken_ = true;
      writes_.clear();
      return;
    }
    WriteNextLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      return;  // OnDone fails what is pending
    }
    Pending p;
    {
      absl::MutexLock lock(&mu_);
      if (pending_.empty()) {
        broken_ = true;
        protocol_error_ = "a response arrived for no request";
      } else {
        p = std::move(pending_.front());
        pending_.pop_front();
      }
    }
    if (!p.done) {
      ctx_.TryCancel();
      return;
    }
    absl::Status s = frame_.Parse(in_);
    in_.Clear();
    if (s.ok() && frame_.header().request_id() != p.id) {
      s = absl::InternalError(absl::StrCat("response for request ", frame_.header().request_id(),
                                           " where ", p.id, " was expected"));
    }
    if (s.ok() && frame_.header().code() != 0) {
      s = absl::Status(static_cast<absl::StatusCode>(frame_.header().code()),
                       frame_.header().message());
    }
    if (s.ok()) {
      p.done(s, &frame_);
    } else {
      p.done(absl::Status(s.code(), absl::StrCat(owner_->name_, ": Exchange: ", s.message())),
             nullptr);
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& status) override {
    std::deque<Pending> failed;
    absl::Status why;
    {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      failed.swap(pending_);
      why = status.ok() ? absl::UnavailableError(protocol_error_.empty()
                                                      ? "the stream ended"
                                                      : protocol_error_)
                        : FromGrpcStatus(status, owner_->name_, "Exchange");
      if (status.ok()) {
        why = absl::UnavailableError(
            absl::StrCat(owner_->name_, ": Exchange: ", why.message()));
      }
      ended_ = true;
      final_ = why;
    }
    for (Pending& p : failed) p.done(why, nullptr);
    done_.store(true, std::memory_order_release);
    absl::MutexLock lock(&owner_->live_mu_);
    --owner_->live_;
  }

  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  struct Pending {
    uint64_t id = 0;
    Done done;
  };

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || writes_.empty()) return;
    writing_ = true;
    out_ = std::move(writes_.front());
    writes_.pop_front();
    StartWrite(&out_);
  }

  PsStream* const owner_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;
  DecodedFrame frame_;  // read side only
  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  std::string protocol_error_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> done_{false};
};

PsStream::PsStream(std::shared_ptr<grpc::Channel> channel, std::string name,
                   std::string method)
    : channel_(std::move(channel)),
      stub_(channel_),
      name_(std::move(name)),
      method_(std::move(method)) {}

PsStream::~PsStream() {
  std::vector<std::shared_ptr<Reactor>> all;
  {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    all = reactors_;
  }
  for (const auto& r : all) r->Cancel();
  absl::MutexLock lock(&live_mu_);
  live_mu_.Await(absl::Condition(
      +[](int* live) { return *live == 0; }, &live_));
}

void PsStream::Send(v1::FrameHeader header, std::vector<grpc::Slice> payload, Done done) {
  absl::Status refused;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::MutexLock lock(&mu_);
    // Forget streams gRPC is done with.
    reactors_.erase(std::remove_if(reactors_.begin(), reactors_.end(),
                                   [](const auto& r) { return r->done(); }),
                    reactors_.end());
    if (reactor_ != nullptr && reactor_->broken()) reactor_ = nullptr;
    const bool fresh = reactor_ == nullptr;
    if (fresh) {
      {
        absl::MutexLock live(&live_mu_);
        ++live_;
      }
      reactor_ = std::make_shared<Reactor>(this);
      reactors_.push_back(reactor_);
    }
    const uint64_t id = next_id_++;
    header.set_request_id(id);
    absl::Status ended;
    if (reactor_->Enqueue(id, EncodeFrame(header, payload), done, fresh, &ended)) return;
    // The server refused the stream (no token, over a limit): another
    // stream would be refused the same way.
    if (!ended.ok() && ended.code() != absl::StatusCode::kUnavailable &&
        ended.code() != absl::StatusCode::kCancelled) {
      refused = ended;
      break;
    }
  }
  if (!refused.ok()) {
    done(refused, nullptr);
    return;
  }
  done(absl::UnavailableError(absl::StrCat(name_, ": Exchange: the stream keeps breaking")),
       nullptr);
}

absl::Status PsStream::Call(v1::FrameHeader header, std::vector<grpc::Slice> payload,
                            absl::Duration timeout,
                            const std::function<absl::Status(const DecodedFrame&)>& on_response) {
  absl::Notification done;
  absl::Status result;
  Send(std::move(header), std::move(payload),
       [&](const absl::Status& s, const DecodedFrame* frame) {
         result = s.ok() ? on_response(*frame) : s;
         done.Notify();
       });
  if (!done.WaitForNotificationWithTimeout(timeout)) {
    Cancel();
    done.WaitForNotification();
    return absl::DeadlineExceededError(absl::StrCat(
        name_, ": Exchange: no answer within ", absl::FormatDuration(timeout)));
  }
  return result;
}

void PsStream::Cancel() {
  std::shared_ptr<Reactor> r;
  {
    absl::MutexLock lock(&mu_);
    r = std::move(reactor_);
    reactor_ = nullptr;
  }
  if (r != nullptr) r->Cancel();
}

}  // namespace pstrain::worker
