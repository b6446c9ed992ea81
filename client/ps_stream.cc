#include "client/ps_stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "transport/grpc_status.h"
#include "base/logging.h"
#include "transport/shared_memory.h"
#include "base/status_macros.h"

namespace pstrain::client {

// The frame bookkeeping of one open stream, whatever carries its frames:
// requests in order, each response matched to the oldest one, shared
// memory offered and used. A subclass moves the bytes (QueueLocked out;
// Received, Broke and Ended in).
class PsStream::Connection {
 public:
  explicit Connection(PsStream* owner) : owner_(owner) {
    if (owner_->shared_bytes_ > 0) {
      auto made = SharedRegion::Create(owner_->shared_bytes_);
      if (made.ok()) {
        shm_ = *std::move(made);
      } else {
        Log(owner_->name_, ": tensor bytes travel in the frames: ", made.status().message());
      }
    }
  }
  virtual ~Connection() = default;

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
    QueueLocked(EncodeFrame(h, {}));
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
  bool Enqueue(v1::FrameHeader* header, const std::vector<grpc::Slice>& payload, const Done& done,
               const ReplyInto& reply_into, bool fresh, absl::Status* ended) {
    absl::MutexLock lock(&mu_);
    if (ended_) *ended = final_;
    Pending p;
    p.id = header->request_id();
    p.done = done;
    p.reply_into = reply_into;
    if (broken_ && fresh && !ended_) {
      pending_.push_back(std::move(p));
      return true;
    }
    if (broken_) return false;
    grpc::ByteBuffer frame;
    if (PlaceInSharedMemoryLocked(header, payload, &p)) {
      frame = EncodeFrame(*header, {});
    } else {
      // The hint is this stream's to act on; without shared memory of its
      // own, the header goes as the caller wrote it.
      if (owner_->shared_bytes_ > 0) header->clear_shm_reply_capacity();
      frame = EncodeFrame(*header, payload);
    }
    pending_.push_back(std::move(p));
    QueueLocked(std::move(frame));
    return true;
  }

  virtual void Cancel() = 0;

  bool done() const { return done_.load(std::memory_order_acquire); }

 protected:
  // Sends `frame` after those queued before it.
  virtual void QueueLocked(grpc::ByteBuffer frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;

  // Where the oldest request's response may be received into (empty: none).
  ReplyInto OldestReplyInto() {
    absl::MutexLock lock(&mu_);
    return pending_.empty() ? ReplyInto() : pending_.front().reply_into;
  }

  // One response arrived: runs the oldest request's `done` with it (its
  // payload, `delivered` bytes, already in the request's reply_into when
  // not 0). False when the stream must end (a response to no request).
  bool Received(const grpc::ByteBuffer& in, int64_t delivered = 0) {
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
    if (!p.done) return false;
    absl::Status s = frame_.Parse(in);
    if (s.ok() && delivered > 0) frame_.SetDelivered(delivered);
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
      return true;
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
    return true;
  }

  // Sending or receiving failed: nothing more is sent; Ended follows.
  void Broke() {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }

  // The stream is over (`why`, or the protocol error found): fails every
  // request still pending. The connection's last act.
  void Ended(absl::Status why) {
    std::deque<Pending> failed;
    {
      absl::MutexLock lock(&mu_);
      broken_ = true;
      failed.swap(pending_);
      if (!protocol_error_.empty()) {
        why = absl::UnavailableError(absl::StrCat(owner_->name_, ": Exchange: ", protocol_error_));
      }
      ended_ = true;
      final_ = why;
    }
    for (Pending& p : failed) p.done(why, nullptr);
    done_.store(true, std::memory_order_release);
    absl::MutexLock lock(&owner_->live_mu_);
    --owner_->live_;
  }

  PsStream* const owner_;
  absl::Mutex mu_;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;

 private:
  struct Pending {
    uint64_t id = 0;
    Done done;
    bool attach = false;  // the offer of shared memory
    bool shared = false;  // holds the ring's oldest allocation
    int64_t reply_offset = 0;
    int64_t reply_capacity = 0;
    ReplyInto reply_into;
  };

  // The PS's answer to the offer. Either way the name goes: the PS has the
  // region mapped, or never will.
  void Attached(const absl::Status& s) {
    const bool ok = s.ok() && frame_.header().shm_attached();
    shm_->Unlink();
    if (!ok) {
      Log(owner_->name_, ": tensor bytes travel in the frames: ",
          s.ok() ? frame_.header().message() : s.message());
      return;
    }
    Log(owner_->name_, ": tensor bytes through shared memory (", shm_->size() >> 10,
        " KiB; this PS is on the same host)");
    absl::MutexLock lock(&mu_);
    ring_ = std::make_unique<RegionRing>(SharedRegion::kDataStart, shm_->size());
    owner_->shares_memory_.store(true, std::memory_order_relaxed);
  }

  // Copies the payload into the region and reserves the reply space the
  // header asks for, filling in the header's shm_* fields and `p`; false
  // (nothing changed) when there is no region or not enough free room.
  bool PlaceInSharedMemoryLocked(v1::FrameHeader* header, const std::vector<grpc::Slice>& payload,
                                 Pending* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  // Set before the stream starts and never changed: read without mu_.
  std::unique_ptr<SharedRegion> shm_;
  DecodedFrame frame_;  // read side only
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  std::string protocol_error_ ABSL_GUARDED_BY(mu_);
  // Space in shm_ held by requests in flight; set once the PS has mapped it.
  std::unique_ptr<RegionRing> ring_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> done_{false};
};

// Frames in a gRPC bidi stream.
class PsStream::GrpcConnection final
    : public PsStream::Connection,
      public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit GrpcConnection(PsStream* owner) : Connection(owner) {
    owner_->stub_.PrepareBidiStreamingCall(&ctx_, owner_->method_, grpc::StubOptions(), this);
    StartRead(&in_);
    StartCall();
  }

  void Cancel() override { ctx_.TryCancel(); }

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
      Broke();
      return;  // OnDone fails what is pending
    }
    const bool more = Received(in_);
    in_.Clear();
    if (!more) {
      ctx_.TryCancel();
      return;
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::Status why =
        status.ok()
            ? absl::UnavailableError(absl::StrCat(owner_->name_, ": Exchange: the stream ended"))
            : FromGrpcStatus(status, owner_->name_, "Exchange");
    Ended(why);
  }

 private:
  void QueueLocked(grpc::ByteBuffer frame) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writes_.push_back(std::move(frame));
    WriteNextLocked();
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || writes_.empty()) return;
    writing_ = true;
    out_ = std::move(writes_.front());
    writes_.pop_front();
    StartWrite(&out_);
  }

  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
};

// Frames over a plain TCP connection (transport/frame_socket.h), already
// connected and greeted: a thread writes the queued frames in order, another
// reads the responses.
class PsStream::TcpConnection final : public PsStream::Connection {
 public:
  TcpConnection(PsStream* owner, std::unique_ptr<FrameSocket> socket)
      : Connection(owner), socket_(std::move(socket)) {
    writer_ = std::thread([this] { WriteLoop(); });
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~TcpConnection() override {
    Cancel();
    for (std::thread* t : {&writer_, &reader_}) {
      if (!t->joinable()) continue;
      if (t->get_id() == std::this_thread::get_id()) {
        t->detach();
      } else {
        t->join();
      }
    }
  }

  void Cancel() override {
    socket_->Shutdown();
    Broke();
  }

 private:
  void QueueLocked(grpc::ByteBuffer frame) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writes_.push_back(std::move(frame));
  }

  void WriteLoop() {
    for (;;) {
      grpc::ByteBuffer out;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](TcpConnection* c)
                 ABSL_NO_THREAD_SAFETY_ANALYSIS { return c->broken_ || !c->writes_.empty(); },
            this));
        if (broken_) {
          writes_.clear();
          return;
        }
        out = std::move(writes_.front());
        writes_.pop_front();
      }
      if (!socket_->Write(out).ok()) {
        Cancel();  // the reader ends the stream
        return;
      }
      out.Clear();
      absl::MutexLock lock(&mu_);
      ++written_;
    }
  }

  void ReadLoop() {
    absl::Status why;
    for (;;) {
      grpc::ByteBuffer in;
      int64_t delivered = 0;
      why = ReadResponse(&in, &delivered);
      if (!why.ok()) break;
      {
        // The request is done with only once the writer is back from
        // sending it: its borrowed payload may be freed as soon as the
        // caller hears the answer, which can arrive first.
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](TcpConnection* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return c->broken_ || c->written_ > c->answered_;
            },
            this));
        ++answered_;
      }
      if (!Received(in, delivered)) break;
    }
    Cancel();
    if (why.ok() || why.code() == absl::StatusCode::kOutOfRange) {
      why = absl::UnavailableError("the PS closed the connection");
    }
    Ended(
        absl::Status(why.code(), absl::StrCat(owner_->name_, ": Exchange (TCP): ", why.message())));
  }

  // Reads the next response. A large one whose payload is exactly the size
  // of the oldest request's reply_into has its payload received straight
  // into it (`delivered` bytes; `frame` then holds the header alone);
  // anything else is read whole into a pooled buffer.
  absl::Status ReadResponse(grpc::ByteBuffer* frame, int64_t* delivered) {
    auto length = socket_->ReadLength(int64_t{1} << 40);
    if (!length.ok()) return length.status();
    const uint64_t n = *length;
    const ReplyInto into = n >= kDirectMin ? OldestReplyInto() : ReplyInto();
    if (into.empty()) {
      if (n == 0) {
        *frame = grpc::ByteBuffer();
        return absl::OkStatus();
      }
      BufferPool::Buffer buffer = owner_->pool_->Acquire(n);
      PSTRAIN_RETURN_IF_ERROR(socket_->ReadBytes(buffer.data(), n));
      grpc::Slice slice = std::move(buffer).ToSlice();
      *frame = grpc::ByteBuffer(&slice, 1);
      return absl::OkStatus();
    }
    // The frame's start: Frame.header (field 1) and the tag and length of
    // Frame.payload (field 2), when they fit in the first kPrefix bytes.
    char prefix[kPrefix];
    const size_t got = std::min<uint64_t>(n, kPrefix);
    PSTRAIN_RETURN_IF_ERROR(socket_->ReadBytes(prefix, got));
    const absl::string_view head(prefix, got);
    size_t header_end = 0, payload_at = 0;
    uint64_t payload_size = 0;
    int64_t wanted = 0;
    for (const auto& piece : into) wanted += piece.second;
    if (FramePrefix(head, &header_end, &payload_at, &payload_size) &&
        payload_at + payload_size == n && static_cast<int64_t>(payload_size) == wanted) {
      // The payload bytes already read, then the rest straight in place.
      std::vector<std::pair<char*, size_t>> rest;
      size_t have = got - payload_at;
      const char* from = prefix + payload_at;
      for (const auto& [dst, size] : into) {
        const size_t now = std::min<size_t>(have, size);
        std::memcpy(dst, from, now);
        from += now;
        have -= now;
        if (now < static_cast<size_t>(size)) rest.push_back({dst + now, size - now});
      }
      PSTRAIN_RETURN_IF_ERROR(socket_->ReadScattered(std::move(rest)));
      grpc::Slice header(prefix, header_end);
      *frame = grpc::ByteBuffer(&header, 1);
      *delivered = static_cast<int64_t>(payload_size);
      return absl::OkStatus();
    }
    BufferPool::Buffer buffer = owner_->pool_->Acquire(n);
    std::memcpy(buffer.data(), prefix, got);
    PSTRAIN_RETURN_IF_ERROR(socket_->ReadBytes(buffer.data() + got, n - got));
    grpc::Slice slice = std::move(buffer).ToSlice();
    *frame = grpc::ByteBuffer(&slice, 1);
    return absl::OkStatus();
  }

  // Responses at least this large are received in place when they can be.
  static constexpr uint64_t kDirectMin = 64 << 10;
  // Bytes read first to find where the payload starts.
  static constexpr size_t kPrefix = 4096;

  const std::unique_ptr<FrameSocket> socket_;
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  // Requests the writer has finished sending, and responses read.
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread writer_;
  std::thread reader_;
};

PsStream::PsStream(std::shared_ptr<grpc::Channel> channel, std::string name, std::string method,
                   int64_t shared_bytes, std::optional<TcpRoute> tcp)
    : channel_(std::move(channel)),
      stub_(channel_),
      name_(std::move(name)),
      method_(std::move(method)),
      shared_bytes_(shared_bytes),
      tcp_(std::move(tcp)),
      pool_(BufferPool::Create(64 << 20)) {}

std::shared_ptr<PsStream::Connection> PsStream::OpenLocked() {
  shares_memory_.store(false, std::memory_order_relaxed);
  if (tcp_.has_value() && !tcp_refused_) {
    auto socket = ConnectTcp();
    if (socket.ok()) {
      over_tls_.store((*socket)->tls());
      over_kernel_tls_.store((*socket)->kernel_tls_send() && (*socket)->kernel_tls_receive());
      if (!over_tcp_.exchange(true)) {
        Log(name_, ": Exchange frames over TCP (", (*socket)->peer(),
            (*socket)->tls() ? absl::StrCat(", ", (*socket)->DescribeTransport()) : "", ")");
      }
      return std::make_shared<TcpConnection>(this, *std::move(socket));
    }
    if (socket.status().code() != absl::StatusCode::kNotFound) {
      // The PS offers TCP but it cannot be reached that way (a port not
      // open between the hosts, say): gRPC from now on.
      tcp_refused_ = true;
      Log(name_, ": Exchange frames in gRPC: ", socket.status().message());
    }
  }
  over_tcp_.store(false);
  over_tls_.store(false);
  over_kernel_tls_.store(false);
  return std::make_shared<GrpcConnection>(this);
}

absl::StatusOr<std::unique_ptr<FrameSocket>> PsStream::ConnectTcp() {
  auto port = tcp_->port();
  if (!port.ok() || *port <= 0) {
    return absl::NotFoundError(port.ok() ? "the PS takes no frames over TCP"
                                         : std::string(port.status().message()));
  }
  auto socket = FrameSocket::Connect(tcp_->host, *port, kTcpTimeout);
  if (!socket.ok()) return socket.status();
  if (tcp_->tls != nullptr) {
    absl::Status s = (*socket)->StartTls(*tcp_->tls, tcp_->host, kTcpTimeout);
    if (!s.ok()) return s;
  }
  v1::FrameHeader hello;
  hello.set_tcp_hello(true);
  hello.set_tcp_token(tcp_->token);
  (*socket)->SetTimeout(kTcpTimeout);
  absl::Status s = (*socket)->Write(EncodeFrame(hello, {}));
  if (!s.ok()) return s;
  auto answer = (*socket)->Read(*pool_, 1 << 20);
  if (!answer.ok()) return answer.status();
  DecodedFrame frame;
  s = frame.Parse(*answer);
  if (!s.ok()) return s;
  if (frame.header().code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(frame.header().code()),
                        absl::StrCat("the PS refused the connection: ", frame.header().message()));
  }
  (*socket)->SetTimeout(absl::InfiniteDuration());
  return socket;
}

PsStream::~PsStream() {
  std::vector<std::shared_ptr<Connection>> all;
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

void PsStream::Send(v1::FrameHeader header, std::vector<grpc::Slice> payload, Done done,
                    ReplyInto reply_into) {
  absl::Status refused;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::MutexLock lock(&mu_);
    // Forget streams gRPC is done with.
    reactors_.erase(
        std::remove_if(reactors_.begin(), reactors_.end(), [](const auto& r) { return r->done(); }),
        reactors_.end());
    if (reactor_ != nullptr && reactor_->broken()) reactor_ = nullptr;
    const bool fresh = reactor_ == nullptr;
    if (fresh) {
      {
        absl::MutexLock live(&live_mu_);
        ++live_;
      }
      reactor_ = OpenLocked();
      reactors_.push_back(reactor_);
      reactor_->OfferSharedMemory(next_id_++);
    }
    header.set_request_id(next_id_++);
    absl::Status ended;
    if (reactor_->Enqueue(&header, payload, done, reply_into, fresh, &ended)) return;
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
    return absl::DeadlineExceededError(
        absl::StrCat(name_, ": Exchange: no answer within ", absl::FormatDuration(timeout)));
  }
  return result;
}

void PsStream::Cancel() {
  std::shared_ptr<Connection> r;
  {
    absl::MutexLock lock(&mu_);
    r = std::move(reactor_);
    reactor_ = nullptr;
  }
  if (r != nullptr) r->Cancel();
}

}  // namespace pstrain::client
