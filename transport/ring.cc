#include "transport/ring.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/bfloat16.h"
#include "base/float_ops.h"
#include "base/status_macros.h"

namespace pstrain {
namespace {

// How long a link's TLS handshake may take.
constexpr absl::Duration kHandshakeTimeout = absl::Seconds(5);

// Frame headers that are not a length (ring.h): a piece in the next shared
// slot (its length in the low bits), and a notice, whose frame follows.
constexpr uint64_t kPieceMark = uint64_t{1} << 61;
constexpr uint64_t kNoticeMark = uint64_t{1} << 62;
// The largest frame a length header may announce, and a notice's.
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 40;
constexpr int64_t kMaxNoticeBytes = 64 << 10;

std::string Hello(const std::string& job_key, int rank, int size) {
  return absl::StrCat("pstrain-ring job=", job_key, " rank=", rank, " size=", size);
}

std::string Describe(const RingMember& m) {
  return absl::StrCat(m.name, " (", m.host, ":", m.port, ")");
}

// Whether a == b, in time that depends only on their lengths.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A shared link's region: the token (bytes 0-7), the count of pieces the
// reader has handed back (8-15), then the slots from kDataStart.
constexpr int64_t kHandedBackOffset = 8;
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the handed-back count is shared between processes");

std::atomic<uint64_t>* HandedBack(const SharedRegion& region) {
  return reinterpret_cast<std::atomic<uint64_t>*>(region.data() + kHandedBackOffset);
}

// [begin, end) of chunk c of n over `count` elements: sizes differ by one at most.
std::pair<int64_t, int64_t> Chunk(int64_t count, int n, int c) {
  return {count * c / n, count * (c + 1) / n};
}

}  // namespace

Ring::Ring(const RingOptions& options)
    : members_(options.members),
      rank_(options.rank),
      timeout_(options.timeout),
      silence_(options.timeout),
      piece_bytes_(std::max<int64_t>(options.piece_bytes / sizeof(float) * sizeof(float),
                                     sizeof(float))) {}

Ring::~Ring() {
  Shutdown();
  if (sender_.joinable()) sender_.join();
}

absl::StatusOr<std::unique_ptr<Ring>> Ring::Form(const RingOptions& options) {
  const int n = static_cast<int>(options.members.size());
  if (n == 0) return absl::InvalidArgumentError("a ring needs at least one member");
  if (options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring rank ", options.rank, " is outside 0..", n - 1));
  }
  std::unique_ptr<Ring> ring(new Ring(options));
  if (n > 1) {
    absl::Status s = ring->Connect(options);
    if (s.ok()) s = ring->ShareLinks(options);
    if (!s.ok()) return s;
  }
  ring->scratch_.resize(ring->piece_bytes_ / sizeof(float));
  ring->sender_ = std::thread([r = ring.get()] { r->SendLoop(); });
  return ring;
}

absl::Status Ring::Connect(const RingOptions& options) {
  const int n = size();
  const RingMember& self = members_[rank_];
  const RingMember& right = members_[(rank_ + 1) % n];
  const RingMember& left = members_[(rank_ + n - 1) % n];
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  auto listener = FrameListener::Listen(
      options.listen_host.empty() ? self.host : options.listen_host, self.port);
  if (!listener.ok()) {
    return absl::UnavailableError(
        absl::StrCat("ring: ", self.name, " cannot listen: ", listener.status().message()));
  }
  // The right neighbour, tried until it listens; then this member's hello.
  absl::Status connected;
  // The hello, then the token on a line of its own when there is one.
  const std::string hello = Hello(options.job_key, rank_, n) +
                            (options.token.empty() ? "" : "\n" + options.token);
  if ((options.tls_server == nullptr) != (options.tls_client == nullptr)) {
    return absl::InvalidArgumentError("ring: TLS needs both the server's and the client's side");
  }
  std::thread connector([&] {
    absl::Status last = absl::DeadlineExceededError("no attempt");
    while (absl::Now() < deadline) {
      auto socket = FrameSocket::Connect(right.host, right.port, absl::Seconds(2));
      if (socket.ok()) {
        (*socket)->SetTimeout(timeout_);
        last = options.tls_client == nullptr
                   ? absl::OkStatus()
                   : (*socket)->StartTls(*options.tls_client, right.host, kHandshakeTimeout);
        if (last.ok()) last = (*socket)->WriteBytes(hello.data(), hello.size());
        if (last.ok()) {
          right_ = std::move(*socket);
          connected = absl::OkStatus();
          return;
        }
      } else {
        last = socket.status();
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    connected = absl::DeadlineExceededError(
        absl::StrCat("ring: ", self.name, " could not reach its right neighbour ",
                     Describe(right), " in ", absl::FormatDuration(options.connect_timeout),
                     ": ", last.message()));
  });
  // The left neighbour: the first connection whose hello names it. Each
  // connection's hello is read on a thread of its own (5 s at most), so
  // one that says nothing (a stray connection, a port scan, a task of a
  // launch gone) does not hold up the neighbour's connection behind it.
  const std::string expected = Hello(options.job_key, (rank_ + n - 1) % n, n);
  absl::Mutex mu;
  int winner = -1;  // the index in `pending` of the left neighbour's socket
  // Set once the wait is over and the other connections are cut: what their
  // readers then find is this member's doing, not a refusal to report.
  bool cut = false;
  absl::Status accepted = absl::DeadlineExceededError(
      absl::StrCat("ring: ", self.name, " heard nothing from its left neighbour ",
                   Describe(left), " in ", absl::FormatDuration(options.connect_timeout)));
  std::vector<std::unique_ptr<FrameSocket>> pending;
  std::vector<std::thread> readers;
  constexpr int kMaxPending = 64;
  auto read_hello = [&](int i, FrameSocket* socket) {
    if (options.tls_server != nullptr) {
      absl::Status handshake = socket->StartTls(*options.tls_server, "", kHandshakeTimeout);
      if (!handshake.ok()) {
        // Not a member of this job (another CA, no certificate, plaintext).
        absl::MutexLock lock(&mu);
        if (winner < 0 && !cut) {
          accepted = absl::FailedPreconditionError(absl::StrCat(
              "ring: ", self.name, " was reached by ", socket->peer(),
              ", not taken for its left neighbour ", Describe(left), ": ", handshake.message()));
        }
        return;
      }
    }
    auto length = socket->ReadLength(4096);
    std::string said(length.ok() ? *length : 0, '\0');
    if (!length.ok() || !socket->ReadBytes(said.data(), said.size()).ok()) said.clear();
    const size_t newline = said.find('\n');
    const std::string hello = said.substr(0, newline);
    const std::string token = newline == std::string::npos ? "" : said.substr(newline + 1);
    absl::MutexLock lock(&mu);
    if (winner >= 0 || cut) return;
    if (hello == expected && SameToken(token, options.token)) {
      winner = i;
      return;
    }
    // Another job's task, a stray connection, or one without the token:
    // dropped (the token is never echoed).
    accepted = absl::FailedPreconditionError(
        hello != expected
            ? absl::StrCat("ring: ", self.name, " was reached by ", socket->peer(), " saying \"",
                           hello, "\", not by its left neighbour ", Describe(left), " of this job")
            : absl::StrCat("ring: ", self.name, " was reached by ", socket->peer(), " presenting ",
                           token.empty() ? "no" : "a wrong",
                           " cluster token: not taken for its left neighbour ", Describe(left)));
  };
  auto found = [&] {
    absl::MutexLock lock(&mu);
    return winner >= 0;
  };
  while (absl::Now() < deadline && !found()) {
    // Short waits, so that a hello read meanwhile ends the loop soon.
    auto socket = (*listener)->Accept(
        std::max(std::min(deadline - absl::Now(), absl::Milliseconds(50)), absl::Milliseconds(1)));
    if (!socket.ok()) {
      absl::MutexLock lock(&mu);
      accepted = socket.status();
      break;
    }
    if (*socket == nullptr) continue;  // nothing yet
    if (static_cast<int>(pending.size()) >= kMaxPending) continue;  // dropped: a flood
    (*socket)->SetTimeout(absl::Seconds(5));
    pending.push_back(*std::move(socket));
    readers.emplace_back(read_hello, static_cast<int>(pending.size()) - 1, pending.back().get());
  }
  // Every other connection is cut, which ends its reader at once.
  {
    absl::MutexLock lock(&mu);
    cut = true;
    for (int i = 0; i < static_cast<int>(pending.size()); ++i) {
      if (i != winner) pending[i]->Shutdown();
    }
  }
  for (std::thread& t : readers) t.join();
  if (winner >= 0) {
    pending[winner]->SetTimeout(timeout_);
    left_ = std::move(pending[winner]);
    accepted = absl::OkStatus();
  }
  connector.join();
  if (!accepted.ok()) return accepted;
  return connected;
}

absl::Status Ring::ShareLinks(const RingOptions& options) {
  const RingMember& right = members_[(rank_ + 1) % size()];
  slot_bytes_ = (piece_bytes_ + 63) / 64 * 64;
  shared_slots_ = std::max(1, options.shared_slots);
  // The offer to the right neighbour: "shm NAME BYTES TOKEN SLOT_BYTES
  // SLOTS", or "socket" when this member does not share.
  std::unique_ptr<SharedRegion> made;
  std::string offer = "socket";
  if (options.shared_memory) {
    auto region = SharedRegion::Create(SharedRegion::kDataStart + shared_slots_ * slot_bytes_);
    if (region.ok()) {
      made = std::move(*region);
      offer = absl::StrCat("shm ", made->name(), " ", made->size(), " ", made->token(), " ",
                           slot_bytes_, " ", shared_slots_);
    }
  }
  if (absl::Status s = right_->WriteBytes(offer.data(), offer.size()); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("ring: sending to ", Describe(right), ": ", s.message()));
  }
  // The left neighbour's offer, taken when its region opens here.
  auto length = left_->ReadLength(1024);
  if (!length.ok()) return ReceiveError(length.status());
  std::string theirs(*length, '\0');
  if (absl::Status s = left_->ReadBytes(theirs.data(), theirs.size()); !s.ok()) {
    return ReceiveError(s);
  }
  std::string answer = "socket";
  const std::vector<std::string> f = absl::StrSplit(theirs, ' ');
  int64_t bytes = 0, slot_bytes = 0;
  uint64_t token = 0;
  int slots = 0;
  if (options.shared_memory && f.size() == 6 && f[0] == "shm" && absl::SimpleAtoi(f[2], &bytes) &&
      absl::SimpleAtoi(f[3], &token) && absl::SimpleAtoi(f[4], &slot_bytes) &&
      absl::SimpleAtoi(f[5], &slots) && slot_bytes == slot_bytes_ && slots == shared_slots_) {
    auto opened = SharedRegion::Open(f[1], bytes, token);
    if (opened.ok()) {
      in_region_ = std::move(*opened);
      answer = "shm";
    }
  }
  if (absl::Status s = left_->WriteBytes(answer.data(), answer.size()); !s.ok()) {
    return ReceiveError(s);
  }
  // The right neighbour's answer to this member's offer.
  length = right_->ReadLength(1024);
  std::string reply(length.ok() ? *length : 0, '\0');
  absl::Status s = length.ok() ? right_->ReadBytes(reply.data(), reply.size()) : length.status();
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("ring: hearing from ", Describe(right), ": ", s.message()));
  }
  if (made != nullptr) {
    made->Unlink();  // opened or refused: the name has served
    if (reply == "shm") out_region_ = std::move(made);
  }
  return absl::OkStatus();
}

std::string Ring::DescribeLinks() const {
  if (size() == 1) return "no links (a ring of one)";
  const char* tcp = right_->tls() ? "tcp inside TLS" : "tcp";
  std::string links =
      absl::StrCat("to ", right_name(), " by ", right_shared() ? "shared memory" : tcp, ", from ",
                   left_name(), " by ", left_shared() ? "shared memory" : tcp);
  // Who seals the TLS records of the link it sends on.
  if (right_->tls()) absl::StrAppend(&links, "; ", right_->DescribeTransport());
  return links;
}

bool Ring::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

absl::Status Ring::WriteShared(const char* data, size_t bytes) {
  if (static_cast<int64_t>(bytes) > slot_bytes_) {
    return absl::InternalError(absl::StrCat("a piece of ", bytes,
                                            " bytes does not fit a shared slot of ", slot_bytes_));
  }
  // A slot is free once the reader has handed back the piece written to it
  // shared_slots_ pieces ago. The reader is usually there already; while it
  // is not, this waits politely, watching for a shutdown, the reader's
  // death and the timeout.
  const std::atomic<uint64_t>* handed_back = HandedBack(*out_region_);
  const absl::Time deadline = absl::Now() + timeout_;
  for (int spins = 0; out_count_ - handed_back->load(std::memory_order_acquire) >=
                      static_cast<uint64_t>(shared_slots_);
       ++spins) {
    if (Stopping()) return absl::CancelledError("shut down");
    if (right_->PeerGone()) return absl::UnavailableError("the connection ended");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no shared slot handed back for ", absl::FormatDuration(timeout_)));
    }
    if (spins < 64) {
      sched_yield();
    } else {
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  char* slot = out_region_->data() + SharedRegion::kDataStart +
               static_cast<int64_t>(out_count_ % shared_slots_) * slot_bytes_;
  std::memcpy(slot, data, bytes);
  ++out_count_;
  // The socket orders the pieces and wakes the reader: it carries the length.
  return right_->WriteMark(kPieceMark | bytes);
}

void Ring::Post(const void* data, size_t bytes, bool on_socket) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({static_cast<const char*>(data), bytes, on_socket});
  ++posted_;
}

int64_t Ring::Posted() {
  absl::MutexLock lock(&mu_);
  return posted_;
}

absl::Status Ring::WaitWritten(int64_t count) {
  absl::MutexLock lock(&mu_);
  auto done = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return written_ >= count || !send_error_.ok();
  };
  mu_.Await(absl::Condition(&done));
  return send_error_;
}

absl::Status Ring::WaitSent() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Ring* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
        return r->written_ == r->posted_ || !r->send_error_.ok();
      },
      this));
  return send_error_;
}

void Ring::SendLoop() {
  while (true) {
    Send send;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Ring* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return r->stop_ || !r->queue_.empty();
          },
          this));
      if (stop_) return;
      send = queue_.front();
      queue_.pop_front();
      sending_ = true;
    }
    absl::Status s = right_ == nullptr
                         ? absl::FailedPreconditionError("a ring of one sends nothing")
                     : out_region_ != nullptr && !send.on_socket
                         ? WriteShared(send.data, send.bytes)
                         : right_->WriteBytes(send.data, send.bytes);
    absl::MutexLock lock(&mu_);
    if (!s.ok() && send_error_.ok()) {
      const RingMember& right = members_[(rank_ + 1) % size()];
      send_error_ = absl::Status(
          absl::IsDeadlineExceeded(s) ? absl::StatusCode::kDeadlineExceeded
                                      : absl::StatusCode::kUnavailable,
          absl::StrCat("ring: sending to ", Describe(right), ": ", s.message()));
    }
    ++written_;
    bytes_sent_ += send.bytes;
    sending_ = false;
  }
}

void Ring::MarkStopped() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  if (send_error_.ok()) send_error_ = absl::CancelledError("ring: shut down");
}

void Ring::AwaitSenderIdle() {
  // The write under way is the last that reads the caller's memory: the
  // loop takes nothing more once stopped.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Ring* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) { return !r->sending_; }, this));
  queue_.clear();
}

void Ring::Abort() {
  Shutdown();  // wakes the write under way
  AwaitSenderIdle();
}

absl::Status Ring::ReceiveError(const absl::Status& s) const {
  const RingMember& left = members_[(rank_ + size() - 1) % size()];
  if (absl::IsDeadlineExceeded(s)) {
    return absl::DeadlineExceededError(
        absl::StrCat("ring: nothing from ", Describe(left), " for ",
                     absl::FormatDuration(silence_), ": it stalled or died"));
  }
  // Whatever ended the connection, the neighbour is gone: a job started
  // again forms its ring anew.
  return absl::UnavailableError(
      absl::StrCat("ring: receiving from ", Describe(left), ": ", s.message()));
}

absl::StatusOr<uint64_t> Ring::ReadHeader() {
  auto header = left_->ReadLength(std::numeric_limits<int64_t>::max());
  if (!header.ok()) return ReceiveError(header.status());
  if (*header != kNoticeMark && (*header & ~kPieceMark) > kMaxFrameBytes) {
    return absl::InternalError(absl::StrCat("ring: ", left_name(), " sent a frame header of ",
                                            *header, ", which no member writes"));
  }
  return *header;
}

absl::StatusOr<uint64_t> Ring::NextHeader() {
  absl::StatusOr<uint64_t> header = ReadHeader();
  if (!header.ok() || *header != kNoticeMark) return header;
  absl::StatusOr<RingNotice> notice = ReadNotice();
  if (!notice.ok()) return notice.status();
  absl::MutexLock lock(&mu_);
  if (!notice_.has_value()) notice_ = *notice;
  return NoticeError(*notice_);
}

absl::StatusOr<RingNotice> Ring::ReadNotice() {
  auto length = left_->ReadLength(kMaxNoticeBytes);
  if (!length.ok()) return ReceiveError(length.status());
  std::string said(*length, '\0');
  if (absl::Status s = left_->ReadBytes(said.data(), said.size()); !s.ok()) {
    return ReceiveError(s);
  }
  const size_t newline = said.find('\n');
  RingNotice notice;
  if (newline == std::string::npos || !absl::SimpleAtoi(said.substr(0, newline), &notice.from) ||
      notice.from < 0 || notice.from >= size()) {
    return absl::InternalError(
        absl::StrCat("ring: ", left_name(), " sent a notice that does not parse: \"", said, "\""));
  }
  notice.text = said.substr(newline + 1);
  return notice;
}

absl::Status Ring::SendNotice(const RingNotice& notice) {
  const std::string frame = absl::StrCat(notice.from, "\n", notice.text);
  absl::Status s = right_->WriteMark(kNoticeMark);
  if (s.ok()) s = right_->WriteBytes(frame.data(), frame.size());
  if (!s.ok()) {
    return absl::Status(s.code() == absl::StatusCode::kDeadlineExceeded
                            ? absl::StatusCode::kDeadlineExceeded
                            : absl::StatusCode::kUnavailable,
                        absl::StrCat("ring: sending a notice to ",
                                     Describe(members_[(rank_ + 1) % size()]), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status Ring::NoticeError(const RingNotice& notice) const {
  return absl::AbortedError(absl::StrCat("ring: ", members_[notice.from].name,
                                         " announced that it failed for good"));
}

absl::Status Ring::Told() const {
  absl::MutexLock lock(&mu_);
  return notice_.has_value() ? NoticeError(*notice_) : absl::OkStatus();
}

std::optional<RingNotice> Ring::notice() const {
  absl::MutexLock lock(&mu_);
  return notice_;
}

absl::Status Ring::Skip(uint64_t bytes) {
  char* buffer = reinterpret_cast<char*>(scratch_.data());
  const uint64_t room = scratch_.size() * sizeof(float);
  while (bytes > 0) {
    const uint64_t n = std::min(bytes, room);
    if (absl::Status s = left_->ReadBytes(buffer, n); !s.ok()) return ReceiveError(s);
    bytes -= n;
  }
  return absl::OkStatus();
}

void Ring::StopSending() {
  MarkStopped();
  AwaitSenderIdle();
}

void Ring::Fail() {
  std::optional<RingNotice> relay;
  if (!relayed_) {
    absl::MutexLock lock(&mu_);
    relay = notice_;
  }
  if (!relay.has_value()) {
    Abort();
    return;
  }
  relayed_ = true;
  // The right neighbour waits for this member's next frame (or, having
  // announced, drops it): the notice goes there instead. Whether it
  // arrives changes nothing here; the member that announced learns it.
  StopSending();
  SendNotice(*relay).IgnoreError();
  Shutdown();
}

absl::Status Ring::Announce(absl::string_view text) {
  if (size() == 1) return absl::OkStatus();
  StopSending();
  const RingNotice mine{rank_, std::string(text)};
  absl::Status s = SendNotice(mine);
  // Until the notice is back: what the left neighbour sends is dropped,
  // each shared piece's slot handed back, and another member's notice
  // (two failing at once) passed on.
  const absl::Time deadline = absl::Now() + timeout_;
  while (s.ok()) {
    if (absl::Now() > deadline) {
      s = absl::DeadlineExceededError(absl::StrCat(
          "ring: the notice of ", members_[rank_].name, "'s failure did not come back around in ",
          absl::FormatDuration(timeout_)));
      break;
    }
    absl::StatusOr<uint64_t> header = ReadHeader();
    if (!header.ok()) {
      s = header.status();
      break;
    }
    if (*header == kNoticeMark) {
      absl::StatusOr<RingNotice> notice = ReadNotice();
      if (!notice.ok()) {
        s = notice.status();
      } else if (notice->from == rank_) {
        break;  // around the ring: every member has it
      } else {
        // Passed on for the member that sent it; a member after that has
        // gone already (it had another notice) changes nothing here.
        SendNotice(*notice).IgnoreError();
      }
    } else if ((*header & kPieceMark) != 0) {
      if (in_region_ != nullptr) ReleasePiece();
    } else {
      s = Skip(*header);
    }
  }
  relayed_ = true;
  Shutdown();
  return s;
}

absl::Status Ring::ReceiveLength(uint64_t header) {
  // Any length is read, so that a frame of the wrong size is named as such.
  absl::StatusOr<uint64_t> length = NextHeader();
  if (!length.ok()) return length.status();
  if (*length != header) {
    return absl::InternalError(absl::StrCat(
        "ring: ", left_name(), " sent ", *length & ~kPieceMark, " bytes",
        (*length & kPieceMark) != 0 ? " in a shared slot" : "", " where ", header & ~kPieceMark,
        " were due: the members disagree on the collective"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const char*> Ring::ReceivePiece(size_t bytes) {
  if (in_region_ == nullptr) {
    if (absl::Status s = ReceiveLength(bytes); !s.ok()) return s;
    char* dst = reinterpret_cast<char*>(scratch_.data());
    if (absl::Status s = left_->ReadBytes(dst, bytes); !s.ok()) return ReceiveError(s);
    bytes_received_ += static_cast<int64_t>(bytes);
    return dst;
  }
  if (absl::Status s = ReceiveLength(kPieceMark | bytes); !s.ok()) return s;
  bytes_received_ += static_cast<int64_t>(bytes);
  return in_region_->data() + SharedRegion::kDataStart +
         static_cast<int64_t>(in_count_ % shared_slots_) * slot_bytes_;
}

void Ring::ReleasePiece() {
  if (in_region_ == nullptr) return;
  ++in_count_;
  HandedBack(*in_region_)->store(in_count_, std::memory_order_release);
}

absl::Status Ring::ReceiveInto(char* dst, size_t bytes) {
  if (in_region_ != nullptr) {
    auto piece = ReceivePiece(bytes);
    if (!piece.ok()) return piece.status();
    std::memcpy(dst, *piece, bytes);
    ReleasePiece();
    return absl::OkStatus();
  }
  if (absl::Status s = ReceiveLength(bytes); !s.ok()) return s;
  if (absl::Status s = left_->ReadBytes(dst, bytes); !s.ok()) return ReceiveError(s);
  bytes_received_ += static_cast<int64_t>(bytes);
  return absl::OkStatus();
}

absl::Status Ring::AllReduceSum(absl::Span<float> data, bool bfloat16_wire) {
  const int n = size();
  if (n == 1) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(Told());
  const int64_t count = static_cast<int64_t>(data.size());
  const int64_t piece = piece_bytes_ / static_cast<int64_t>(sizeof(float));
  float* base = data.data();
  // With a bfloat16 wire, wire_[i] holds the bfloat16 of data[i] that is
  // (or was) being sent; otherwise the floats go out as they are.
  const size_t wire_bytes = bfloat16_wire ? sizeof(uint16_t) : sizeof(float);
  if (bfloat16_wire && static_cast<int64_t>(wire_.size()) < count) wire_.resize(count);
  uint16_t* wire = wire_.data();
  auto post = [&](int64_t p, int64_t len) {
    const void* from = bfloat16_wire ? static_cast<const void*>(wire + p) : base + p;
    Post(from, static_cast<size_t>(len) * wire_bytes);
  };
  // sent_by[k]: the pieces posted once reduce-scatter step k's sends are.
  // Gather step k writes into the chunk that step sent: it waits for those
  // writes first (done long since: the data came back around the ring),
  // which also tells ThreadSanitizer so.
  std::vector<int64_t> sent_by(n, 0);
  // Step 0 of the reduce-scatter: this member's own chunk.
  {
    const auto [begin, end] = Chunk(count, n, rank_);
    for (int64_t p = begin; p < end; p += piece) {
      const int64_t len = std::min(piece, end - p);
      if (bfloat16_wire) FloatsToBfloat16(base + p, len, wire + p);
      post(p, len);
    }
    sent_by[0] = Posted();
  }
  // Steps 0..n-2 reduce (chunk r-s-1 arrives, is added to, and goes on),
  // steps n-1..2n-3 gather (chunk r-s+n-1 arrives, is copied, and goes on
  // but at the last step).
  absl::Status status;
  for (int s = 0; s < 2 * (n - 1) && status.ok(); ++s) {
    const bool reduce = s < n - 1;
    const int c = reduce ? (rank_ - s - 1 + 2 * n) % n : (rank_ - (s - (n - 1)) + 2 * n) % n;
    const auto [begin, end] = Chunk(count, n, c);
    if (!reduce) status = WaitWritten(sent_by[s - (n - 1)]);
    for (int64_t p = begin; p < end && status.ok(); p += piece) {
      const int64_t len = std::min(piece, end - p);
      const size_t bytes = static_cast<size_t>(len) * wire_bytes;
      float* dst = base + p;
      if (reduce) {
        auto in = ReceivePiece(bytes);
        if (!in.ok()) {
          status = in.status();
          break;
        }
        if (bfloat16_wire) {
          AddBfloat16s(dst, reinterpret_cast<const uint16_t*>(*in), len);
        } else {
          AddFloats(dst, reinterpret_cast<const float*>(*in), len);
        }
        ReleasePiece();
        if (bfloat16_wire) {
          FloatsToBfloat16(dst, len, wire + p);
          // The member that completed the chunk keeps the rounded sum the
          // all-gather hands the others, so every member holds the same bits.
          if (s == n - 2) Bfloat16ToFloats(wire + p, len, dst);
        }
      } else if (bfloat16_wire) {
        status = ReceiveInto(reinterpret_cast<char*>(wire + p), bytes);
        if (!status.ok()) break;
        Bfloat16ToFloats(wire + p, len, dst);
      } else {
        status = ReceiveInto(reinterpret_cast<char*>(dst), bytes);
        if (!status.ok()) break;
      }
      if (s < 2 * (n - 1) - 1) post(p, len);
    }
    if (reduce && s + 1 < n - 1) sent_by[s + 1] = Posted();
  }
  if (status.ok()) status = WaitSent();
  if (!status.ok()) Fail();
  return status;
}

absl::StatusOr<std::vector<std::string>> Ring::AllGather(absl::string_view mine,
                                                         absl::Duration wait) {
  const int n = size();
  std::vector<std::string> all(n);
  all[rank_] = std::string(mine);
  if (n == 1) return all;
  PSTRAIN_RETURN_IF_ERROR(Told());
  if (wait > absl::ZeroDuration()) {
    silence_ = wait;
    left_->SetTimeout(wait);
    right_->SetTimeout(wait);
  }
  // The ring's timeout again for what follows.
  absl::Cleanup restore = [this, wait] {
    if (wait <= absl::ZeroDuration()) return;
    silence_ = timeout_;
    left_->SetTimeout(timeout_);
    right_->SetTimeout(timeout_);
  };
  Post(all[rank_].data(), all[rank_].size(), /*on_socket=*/true);
  for (int s = 0; s < n - 1; ++s) {
    const int from = (rank_ - s - 1 + 2 * n) % n;
    absl::StatusOr<uint64_t> length = NextHeader();
    if (length.ok() && *length > (uint64_t{1} << 34)) {
      length = absl::InternalError(absl::StrCat("ring: ", left_name(), " sent a frame header of ",
                                                *length, " where an all-gather's blob was due"));
    }
    if (!length.ok()) {
      Fail();
      return length.status();
    }
    all[from].resize(*length);
    if (absl::Status st = left_->ReadBytes(all[from].data(), *length); !st.ok()) {
      Fail();
      return ReceiveError(st);
    }
    bytes_received_ += static_cast<int64_t>(*length);
    if (s < n - 2) Post(all[from].data(), all[from].size(), /*on_socket=*/true);
  }
  if (absl::Status st = WaitSent(); !st.ok()) {
    Fail();
    return st;
  }
  return all;
}

void Ring::Shutdown() {
  MarkStopped();
  if (right_ != nullptr) right_->Shutdown();
  if (left_ != nullptr) left_->Shutdown();
}

int64_t Ring::bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return bytes_sent_;
}

const std::string& Ring::left_name() const { return members_[(rank_ + size() - 1) % size()].name; }
const std::string& Ring::right_name() const { return members_[(rank_ + 1) % size()].name; }

}  // namespace pstrain
