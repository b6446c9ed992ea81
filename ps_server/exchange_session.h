// The frame logic of one Exchange stream (proto/ps_service.proto), apart
// from its transport: parses each frame (transport/wire_frame.h), checks its
// limits, maps the client's shared memory when offered
// (transport/shared_memory.h), applies its push to the ShardStore and answers
// its pull, at once or, when the pull must wait for a sync step or an ssp
// clock, from the store's WaitList later. The answer goes to the `respond`
// callback given at construction; the gRPC reactor in ps_service.cc queues
// and writes it. Frames are handled one at a time: Handle is called again
// only after the previous frame's answer was given.
#ifndef PSTRAIN_PS_SERVER_EXCHANGE_SESSION_H_
#define PSTRAIN_PS_SERVER_EXCHANGE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "transport/shared_memory.h"
#include "transport/wire_frame.h"
#include "proto/ps_service.pb.h"
#include "store/shard_store.h"

namespace pstrain::ps {

// The tensors a request frame names, viewing `refs`, which must outlive the
// result.
std::vector<ShardStore::TensorRef> RefsOf(
    const google::protobuf::RepeatedPtrField<v1::TensorRef>& refs);

// The tensors request frame `frame` pushes and pulls. Ids sent in the
// payload (TensorRef.id_count) are moved out of the payload into `*ids`,
// which the refs view, as they view the frame's header: both must outlive
// them. InvalidArgument naming the tensor when a ref carries ids both ways
// or a negative count, or the ids need more bytes than the payload holds.
absl::Status FrameRefs(DecodedFrame* frame, std::vector<int64_t>* ids,
                       std::vector<ShardStore::TensorRef>* push,
                       std::vector<ShardStore::TensorRef>* pull);

// Slices sending `held` values in place; each keeps its bytes' hold until
// gRPC releases it.
std::vector<grpc::Slice> HeldSlices(std::vector<HeldBytes> held);

// The frame answering request `id` with error `s`.
grpc::ByteBuffer ErrorFrame(uint64_t id, const absl::Status& s);

struct ExchangeLimits {
  // How long a pull may wait for other replicas when the job sets no bound.
  absl::Duration wait_timeout = absl::Seconds(120);
  // Per frame: tensors named (push and pull together) and table ids.
  int64_t max_tensors = 65536;
  int64_t max_ids = int64_t{1} << 20;
  // Whether shared memory may be attached, and the largest region mapped.
  bool shared_memory = true;
  int64_t max_shared_bytes = int64_t{4} << 30;
};

class ExchangeSession {
 public:
  using Respond = std::function<void(grpc::ByteBuffer answer)>;
  // Runs a task on a thread that may wait; returns at once.
  using WaitElsewhere = std::function<void(std::function<void()> task)>;
  // `store` must outlive the session. A push that meets a checkpoint's hold
  // (ShardStore::push_hold) waits on the calling thread of Handle when
  // `wait_elsewhere` is empty; else it is handed to `wait_elsewhere`, for
  // callers whose thread must not wait (gRPC's callback threads: were they
  // all waiting, the PS could not serve the save that releases the hold).
  ExchangeSession(ShardStore* store, std::shared_ptr<BufferPool> pool, ExchangeLimits limits,
                  Respond respond, WaitElsewhere wait_elsewhere = nullptr);

  // Handles one received frame; `respond` gets its answer exactly once, on
  // this thread or, for a pull that waits, on the one that readies it, or
  // for a push handed to `wait_elsewhere`, on that one. `in` may be cleared
  // once this returns.
  void Handle(const grpc::ByteBuffer& in);

  // The call was cancelled: a waiting pull gives up now (answering
  // Cancelled).
  void Cancel();

 private:
  // Parses the frame and reads its shared-memory fields; an error answers
  // the frame.
  absl::Status Admit(const grpc::ByteBuffer& in);
  absl::Status CheckLimits(const v1::FrameHeader& h) const;
  // Maps the region a frame offers (the stream's first) and says whether it
  // could; a region that cannot be used is no error: the stream carries its
  // payloads inline.
  grpc::ByteBuffer Attach(const v1::FrameHeader& h);
  // Reads the frame's shared-memory fields: its payload from the region,
  // and where its pull's values may go.
  absl::Status UseSharedRegion(const v1::FrameHeader& h);
  // Applies the frame's push; `admitted`: the caller holds a pass through
  // the store's push hold. Returns true when the frame is answered (an
  // error, or a pull of the pushed tensors read back while applying).
  bool Push(const v1::FrameHeader& h, std::vector<ShardStore::TensorRef> tensors,
            v1::FrameHeader& resp, bool admitted);
  // For a bfloat16 frame: the payload's gradients as floats in `*buf`,
  // viewed by `widened`, and each pushed tensor's bytes counted as floats.
  // InvalidArgument naming the tensor when the sizes do not fit.
  absl::Status Widen(std::vector<ShardStore::TensorRef>* tensors,
                     std::optional<BufferPool::Buffer>* buf, Payload* widened);
  // Answers the frame's pull now or parks it until ready.
  void StartPull(v1::FrameHeader resp);
  // Where `size` bytes of pulled values are written: the frame's reply space
  // in shared memory when they fit there, else a pooled buffer put in `buf`.
  char* ReplyBuffer(int64_t size, std::optional<BufferPool::Buffer>* buf);
  // Adds to `resp`, the answer to a frame that pulled, each tensor's version
  // and bytes and the global step.
  void DescribePull(const std::vector<ShardStore::Pulled>& pulled, v1::FrameHeader* resp) const;
  // The answer to a frame that pulled: `resp` described by DescribePull; the
  // `size` bytes of values are in `values`, or, without it, in the frame's
  // reply space in shared memory.
  grpc::ByteBuffer PullReply(v1::FrameHeader resp, const std::vector<ShardStore::Pulled>& pulled,
                             std::optional<BufferPool::Buffer> values, int64_t size);
  // Serves the pull if it is ready (or failed); false to keep waiting.
  bool TryPull();
  // The job's own bound on waiting for other replicas, else the limits'.
  absl::Duration WaitTimeout() const;
  void Expire();

  ShardStore* const store_;
  const std::shared_ptr<BufferPool> pool_;
  const ExchangeLimits limits_;
  const Respond respond_;
  const WaitElsewhere wait_elsewhere_;
  std::atomic<bool> cancelled_{false};
  // The frame being handled and its pull; touched by one thread at a time
  // (Handle, then whoever runs the parked attempt).
  DecodedFrame request_;
  std::vector<int64_t> ids_;  // the request's ids that came in its payload
  bool bfloat16_ = false;     // the request's wire_dtype is BFLOAT16
  ShardStore::PullBatch pull_;
  int64_t pull_size_ = 0;
  v1::FrameHeader pull_header_;
  std::string waiting_for_;
  // The client's shared memory, once attached; the current frame's reply
  // space in it (capacity 0: none).
  std::unique_ptr<SharedRegion> shm_;
  int64_t reply_offset_ = 0;
  int64_t reply_capacity_ = 0;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_EXCHANGE_SESSION_H_
