#include "client/ps_stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/shared_memory.h"

namespace pstrain::client {

class PsStream::Reactor final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Reactor(PsStream* owner) : owner_(owner) {
    if (owner_->shared_bytes_ > 0) {
      auto made = SharedRegion::Create(owner_->shared_bytes_);
      if (made.ok()) {
        shm_ = *std::move(made);
      } else {
        Log(owner_->name_, ": tensor bytes travel in the gRPC frames: ",
            made.status().message());
      }
    }
    owner_->stub_.PrepareBidiStreamingCall(&ctx_, owner_->method_, grpc::StubOptions(), this);
    StartRead(&in_);
    StartCall();
  }

  // Queues the offer of this stream's shared memory as its first frame;
  // nothing when it has none.
  void OfferSharedMemory(uint64_t id) {
    if (shm_ == nullptr) return;
    v1::FrameHeader h;
    h.set_request_id(id);
    v1::SharedRegionRef* ref = h.mutable_shm_attach();
    ref->set_name(shm_->name());
    ref->set_bytes(shm_->size());
    ref->set_token(shm_->token());
    absl::MutexLock lock(&mu_);
    if (broken_) return;
    Pending p;
    p.id = id;
    p.attach = true;
    p.done = [](const absl::Status&, const DecodedFrame*) {};
    pending_.push_back(std::move(p));
    writes_.push_back(EncodeFrame(h, {}));
    WriteNextLocked();
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
  bool Enqueue(v1::FrameHeader* header, const std::vector<grpc::Slice>& payload,
               const Done& done, bool fresh, absl::Status* ended) {
    absl::MutexLock lock(&mu_);
    if (ended_) *ended = final_;
    Pending p;
    p.id = header->request_id();
    p.done = done;
    if (broken_ && fresh && !ended_) {
      pending_.push_back(std::move(p));
      return true;
    }
    if (broken_) return false;
    if (PlaceInSharedMemoryLocked(header, payload, &p)) {
      writes_.push_back(EncodeFrame(*header, {}));
    } else {
      // The hint is this stream's to act on; without shared memory of its
      // own, the header goes as the caller wrote it.
      if (owner_->shared_bytes_ > 0) header->clear_shm_reply_capacity();
      writes_.push_back(EncodeFrame(*header, payload));
    }
    pending_.push_back(std::move(p));
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
    if (p.attach) {
      Attached(s);
      StartRead(&in_);
      return;
    }
    // (Without shared memory of its own the stream leaves shm_reply to the
    // caller, who wrote the request's shm_* fields.)
    if (s.ok() && frame_.header().shm_reply() && owner_->shared_bytes_ > 0) {
      const int64_t n = frame_.header().shm_payload_bytes();
      if (p.reply_capacity == 0 || n < 0 || n > p.reply_capacity || frame_.payload_size() != 0) {
        s = absl::InternalError(absl::StrCat("the PS answered with ", n,
                                             " bytes in shared memory where ", p.reply_capacity,
                                             " were offered"));
      } else {
        frame_.SetExternalPayload(shm_->data() + p.reply_offset, n);
      }
    }
    if (s.ok()) {
      p.done(s, &frame_);
    } else {
      p.done(absl::Status(s.code(), absl::StrCat(owner_->name_, ": Exchange: ", s.message())),
             nullptr);
    }
    if (p.shared) {
      absl::MutexLock lock(&mu_);
      ring_->FreeOldest();
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
    bool attach = false;  // the offer of shared memory
    bool shared = false;  // holds the ring's oldest allocation
    int64_t reply_offset = 0;
    int64_t reply_capacity = 0;
  };

  // The PS's answer to the offer. Either way the name goes: the PS has the
  // region mapped, or never will.
  void Attached(const absl::Status& s) {
    const bool ok = s.ok() && frame_.header().shm_attached();
    shm_->Unlink();
    if (!ok) {
      Log(owner_->name_, ": tensor bytes travel in the gRPC frames: ",
          s.ok() ? frame_.header().message() : s.message());
      return;
    }
    Log(owner_->name_, ": tensor bytes through shared memory (", shm_->size() >> 10,
        " KiB; this PS is on the same host)");
    absl::MutexLock lock(&mu_);
    ring_ = std::make_unique<RegionRing>(SharedRegion::kDataStart, shm_->size());
  }

  // Copies the payload into the region and reserves the reply space the
  // header asks for, filling in the header's shm_* fields and `p`; false
  // (nothing changed) when there is no region or not enough free room.
  bool PlaceInSharedMemoryLocked(v1::FrameHeader* header,
                                 const std::vector<grpc::Slice>& payload, Pending* p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ring_ == nullptr) return false;
    int64_t bytes = 0;
    for (const grpc::Slice& slice : payload) bytes += static_cast<int64_t>(slice.size());
    const int64_t capacity = std::max<int64_t>(header->shm_reply_capacity(), 0);
    if (bytes == 0 && capacity == 0) return false;
    const int64_t request_space = (bytes + 63) / 64 * 64;
    const std::optional<int64_t> at = ring_->Allocate(request_space + capacity);
    if (!at.has_value()) return false;
    char* dst = shm_->data() + *at;
    for (const grpc::Slice& slice : payload) {
      std::memcpy(dst, slice.begin(), slice.size());
      dst += slice.size();
    }
    if (bytes > 0) {
      header->set_shm_payload_offset(*at);
      header->set_shm_payload_bytes(bytes);
    }
    if (capacity > 0) {
      header->set_shm_reply_offset(*at + request_space);
      p->reply_offset = *at + request_space;
      p->reply_capacity = capacity;
    } else {
      header->clear_shm_reply_capacity();
    }
    p->shared = true;
    owner_->shared_frames_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || writes_.empty()) return;
    writing_ = true;
    out_ = std::move(writes_.front());
    writes_.pop_front();
    StartWrite(&out_);
  }

  PsStream* const owner_;
  // Set before the stream starts and never changed: read without mu_.
  std::unique_ptr<SharedRegion> shm_;
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
  // Space in shm_ held by requests in flight; set once the PS has mapped it.
  std::unique_ptr<RegionRing> ring_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> done_{false};
};

PsStream::PsStream(std::shared_ptr<grpc::Channel> channel, std::string name,
                   std::string method, int64_t shared_bytes)
    : channel_(std::move(channel)),
      stub_(channel_),
      name_(std::move(name)),
      method_(std::move(method)),
      shared_bytes_(shared_bytes) {}

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
      reactor_->OfferSharedMemory(next_id_++);
    }
    header.set_request_id(next_id_++);
    absl::Status ended;
    if (reactor_->Enqueue(&header, payload, done, fresh, &ended)) return;
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

}  // namespace pstrain::client
