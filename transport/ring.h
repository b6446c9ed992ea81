// The replicas of a job without PS joined in a ring, for collectives: the
// all-reduce by which they average their gradients (reduce-scatter, then
// all-gather, as Horovod's and NCCL's rings do) and the all-gather of
// variable-sized blobs (sparse rows, a checksum, a step).
//
// Member r listens on its own address and keeps two frame sockets
// (transport/frame_socket.h): one to its right neighbour (r + 1) % n, to
// which it only writes, and one from its left neighbour (r + n - 1) % n,
// from which it only reads. Every collective moves data one way around the
// ring, so a member's sends (on a thread of the ring's) and receives (on
// the caller's) run side by side.
//
// AllReduceSum splits the array into n chunks and each chunk into pieces of
// at most `piece_bytes`. A piece is forwarded as soon as it is reduced, so
// the ring's links all carry data at once (pipelined). Each element is
// summed in one fixed order that depends only on its position, n and the
// piece size, and the all-gather copies the sums bit for bit: every member
// ends with the same bits, and a rerun repeats them.
//
// Between two members on one host the link carries the pieces of an
// all-reduce through shared memory (transport/shared_memory.h): the writer
// copies a piece into one of `shared_slots` slots of a region it made and
// sends only its length on the socket; the reader adds (or copies) straight
// from the slot and hands it back through a counter in the region. The
// socket still orders the pieces and carries the timeouts, a neighbour's
// death and the all-gathers. Whether a link is shared is settled when the
// ring forms: the writer offers a region, and the reader takes it when it
// can open it (same host, same /dev/shm) or the link stays on the socket.
//
// With TLS (RingOptions::tls_server and tls_client, the job's
// certificates: transport/frame_tls.h) every link is a TLS 1.3 connection
// with the PS path's peer checks: the member that dials checks its right
// neighbour's certificate against the CA and the host it dials (or
// tls_server_name), and the member that accepts requires a certificate the
// CA signed from its left neighbour, before any hello. The records are
// sealed by the kernel where it has TLS, else by the member itself; a
// shared link's pieces stay in the shared region (the same host and user),
// and only their lengths travel inside TLS.
//
// Every member must call the same collectives in the same order with the
// same sizes (AllReduceSum: the same count); a mismatch is an error naming
// the neighbour. A neighbour silent for longer than `timeout` fails the
// collective with DeadlineExceeded naming it; one that went away fails it
// with Unavailable. After an error the ring is unusable: the job's tasks
// exit and start again.
//
// A member that fails for good between collectives (its data, a bug) says
// so with Announce before it goes, so that the others end with its failure
// rather than a lost neighbour's (which an orchestrator would restart for
// ever). The notice goes around the ring on the sockets, behind what each
// member had sent: each member meets it where its collective expects the
// left neighbour's next frame, keeps it (notice()), stops sending and
// passes it on, and fails that collective (or the next) with Aborted; the
// member that announced drops what reaches it meanwhile, handing shared
// slots back so that no writer waits on it, until its notice has come
// back around.
//
// On the socket a frame header is a length followed by that many bytes (a
// piece over TCP, an all-gather's blob), kPieceMark | length with nothing
// after it (a piece in the next shared slot), or kNoticeMark followed by
// one frame: "<rank>\n<text>".
// Thread-compatible: one thread calls the collectives and Announce;
// notice() may be read from any thread.
#ifndef PSTRAIN_TRANSPORT_RING_H_
#define PSTRAIN_TRANSPORT_RING_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "transport/frame_socket.h"
#include "transport/frame_tls.h"
#include "transport/shared_memory.h"

namespace pstrain {

struct RingMember {
  std::string name;  // "worker:1", for messages
  std::string host;  // where it listens
  int port = 0;
};

// A member's failure for good, as it announced it (Ring::Announce).
struct RingNotice {
  int from = 0;      // the member's rank
  std::string text;  // what it said, as it said it
};

struct RingOptions {
  std::vector<RingMember> members;  // the ring's order
  int rank = 0;                     // this member's index in `members`
  // Where this member listens (its own host from `members` when empty).
  std::string listen_host;
  // Names the job: a member of another job (a leftover task) is refused.
  std::string job_key;
  // The cluster token (transport/security.h), when the job has one: a
  // member presents it when it joins its right neighbour, and one that
  // presents another (or none) is refused. It travels as the PS path's
  // token-only calls carry theirs: inside TLS when the ring has it, else
  // in the clear, over a private network.
  std::string token;
  // The job's TLS for the link this member accepts (from its left
  // neighbour) and the one it dials (to its right); both or neither.
  std::shared_ptr<const FrameTls> tls_server, tls_client;
  // How long to wait for both neighbours when the ring forms.
  absl::Duration connect_timeout = absl::Seconds(60);
  // How long a neighbour may stay silent inside a collective.
  absl::Duration timeout = absl::Seconds(30);
  int64_t piece_bytes = 512 << 10;
  // Whether a link to a member on the same host may use shared memory.
  bool shared_memory = true;
  // Slots of piece_bytes in a shared link: how far a writer may run ahead.
  int shared_slots = 8;
};

class Ring {
 public:
  // Listens, connects to the right neighbour and accepts the left one
  // (each side retries until connect_timeout). InvalidArgument for bad
  // options; Unavailable or DeadlineExceeded naming the neighbour that
  // never came. A ring of one member has no sockets.
  static absl::StatusOr<std::unique_ptr<Ring>> Form(const RingOptions& options);
  ~Ring();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }

  // Replaces data[i] with the sum over the members of their data[i]. With
  // `bfloat16_wire` the pieces travel as bfloat16 (base/bfloat16.h), half
  // the bytes: each member adds what it receives to its float32 values and
  // sends on the rounded partial sum, and the member that completes a chunk
  // rounds it too before the all-gather, so every member still ends with
  // the same bits (each sum rounded once per hop, n - 1 times at most).
  absl::Status AllReduceSum(absl::Span<float> data, bool bfloat16_wire = false);

  // Each member's `mine`, in rank order (this member's included). `wait`
  // above zero: how long a neighbour may stay silent in this collective
  // instead of the ring's timeout (a member with long work before it joins:
  // the chief checkpointing and scoring the test split at the job's end).
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine,
                                                     absl::Duration wait = absl::ZeroDuration());

  // Tells every other member that this one failed for good, with `text`
  // (which the ring carries as it is), then shuts the ring down. Returns
  // once the notice came back around (OK: every member has it), or with
  // DeadlineExceeded or Unavailable when it did not within `timeout` (a
  // member lost meanwhile). Between collectives only.
  absl::Status Announce(absl::string_view text);
  // The first notice another member announced that reached this one (none
  // yet). A collective that meets one fails with Aborted naming the member,
  // and so does every later one.
  std::optional<RingNotice> notice() const;

  // Wakes a collective under way (it fails) and fails every later one.
  void Shutdown();

  // Bytes this member sent and received in collectives so far.
  int64_t bytes_sent() const;
  int64_t bytes_received() const { return bytes_received_; }
  const std::string& left_name() const;
  const std::string& right_name() const;
  // Whether the link to the right (left) neighbour goes through shared memory.
  bool right_shared() const { return out_region_ != nullptr; }
  bool left_shared() const { return in_region_ != nullptr; }
  // "to worker:1 by shared memory, from worker:1 by tcp", for logs and benchmarks.
  std::string DescribeLinks() const;

 private:
  Ring(const RingOptions& options);
  absl::Status Connect(const RingOptions& options);
  // Offers the right neighbour a shared region and answers the left one's
  // offer; a link that cannot share stays on its socket.
  absl::Status ShareLinks(const RingOptions& options);

  // The sender thread's queue: pieces written in the order posted.
  struct Send {
    const char* data;
    size_t bytes;
    bool on_socket;  // an all-gather's blob: always inline on the socket
  };
  void Post(const void* data, size_t bytes, bool on_socket = false);
  // The sender's write of one piece into the next shared slot, once the
  // reader has handed it back, then its length on the socket.
  absl::Status WriteShared(const char* data, size_t bytes);
  // Waits until every posted piece was written; the sender's first error.
  absl::Status WaitSent();
  // The pieces posted so far; waits until the first `count` were written.
  int64_t Posted();
  absl::Status WaitWritten(int64_t count);
  // After an error: Shutdown, then waits until the sender has stopped
  // reading the caller's memory.
  void Abort();
  // After a collective's error: Abort, or, when the error was a notice
  // not passed on yet, StopSending, the notice to the right, Shutdown.
  void Fail();
  // Marks the ring stopped: the sender takes nothing more, a shared
  // write waiting for a slot gives up, and later collectives fail.
  void MarkStopped();
  // Waits until the sender has no write under way, then drops what is queued.
  void AwaitSenderIdle();
  // Stops the sender after the write under way (a frame ends whole; a
  // shared piece not yet written is dropped) and drops what is queued:
  // the caller may then write on right_.
  void StopSending();
  // The next frame header from the left (a length, kPieceMark | length,
  // or kNoticeMark); socket errors as ReceiveError, a header no member
  // writes as Internal.
  absl::StatusOr<uint64_t> ReadHeader();
  // ReadHeader's that is not a notice: a notice is read, kept and returned
  // as NoticeError.
  absl::StatusOr<uint64_t> NextHeader();
  // The notice frame after a kNoticeMark header.
  absl::StatusOr<RingNotice> ReadNotice();
  // Writes `notice` to the right neighbour (the sender must be stopped).
  absl::Status SendNotice(const RingNotice& notice);
  // Aborted naming the member that announced `notice`.
  absl::Status NoticeError(const RingNotice& notice) const;
  // NoticeError of the notice received, if any; else OK.
  absl::Status Told() const;
  // Reads and drops `bytes` bytes from the left.
  absl::Status Skip(uint64_t bytes);
  void SendLoop();
  // The next piece of an all-reduce, exactly `bytes` long: its shared
  // slot, or scratch_ after reading it from the socket. The bytes stay put
  // until ReleasePiece.
  absl::StatusOr<const char*> ReceivePiece(size_t bytes);
  void ReleasePiece();
  // The next piece, exactly `bytes` long, copied to `dst`.
  absl::Status ReceiveInto(char* dst, size_t bytes);
  // Reads one frame's header and checks it is `header` (a length, or
  // kPieceMark | length).
  absl::Status ReceiveLength(uint64_t header);
  bool Stopping();
  // An error of the receiving side, naming the left neighbour.
  absl::Status ReceiveError(const absl::Status& s) const;

  const std::vector<RingMember> members_;
  const int rank_;
  const absl::Duration timeout_;
  // How long the collective under way lets a neighbour be silent: timeout_,
  // or an all-gather's longer wait. The collective's caller's alone.
  absl::Duration silence_;
  const int64_t piece_bytes_;
  std::unique_ptr<FrameSocket> right_;  // written by the sender thread only
  std::unique_ptr<FrameSocket> left_;   // read by the caller only
  std::vector<float> scratch_;          // a received piece, before it is added
  std::vector<uint16_t> wire_;          // bfloat16 pieces to send, at their data offsets
  int64_t bytes_received_ = 0;
  // Shared links: the region this member writes (right) and the one it
  // reads (left); slot i of a region starts at its kDataStart + i * slot_bytes_.
  std::unique_ptr<SharedRegion> out_region_;  // slots written by the sender thread only
  std::unique_ptr<SharedRegion> in_region_;   // slots read by the caller only
  int64_t slot_bytes_ = 0;
  int shared_slots_ = 0;
  uint64_t out_count_ = 0;  // pieces written to out_region_ (sender thread)
  uint64_t in_count_ = 0;   // pieces taken from in_region_ (caller)

  mutable absl::Mutex mu_;
  std::deque<Send> queue_ ABSL_GUARDED_BY(mu_);
  int64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status send_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // a write is under way
  std::optional<RingNotice> notice_ ABSL_GUARDED_BY(mu_);
  bool relayed_ = false;  // notice_ was passed on (the caller's)
  std::thread sender_;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_RING_H_
