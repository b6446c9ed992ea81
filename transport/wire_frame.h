// Frames of the PS data path (proto/ps_service.proto, message Frame) built and
// parsed straight on gRPC byte buffers, so tensor bytes are never copied into
// or out of protobuf strings:
//   - EncodeFrame lays out the protobuf encoding of Frame as a small slice
//     (field tags, lengths, the serialized header) followed by the caller's
//     payload slices, which gRPC writes to the socket without copying.
//   - DecodedFrame parses a received buffer: the header is parsed with
//     protobuf, the payload stays in gRPC's received slices, seen as a
//     Payload (base/payload.h) that the caller copies from, reads in place
//     or rewrites in place before sending those slices back as its answer.
//   - BufferPool hands out reusable byte buffers as gRPC slices; a buffer
//     returns to the pool when gRPC releases the slice, so steady traffic
//     allocates nothing at MiB sizes.
// The encoding is exactly protobuf's, so any gRPC client may speak it with the
// generated Frame message.
#ifndef PSTRAIN_TRANSPORT_WIRE_FRAME_H_
#define PSTRAIN_TRANSPORT_WIRE_FRAME_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "base/payload.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/ps_service.pb.h"

namespace pstrain {

// A slice that points at caller memory without copying or owning it: the
// memory must stay unchanged until gRPC is done with the message (for a
// client, until the call's write completes).
grpc::Slice BorrowSlice(const void* data, size_t size);

// Frame{header, payload = concatenation of `payload`}.
grpc::ByteBuffer EncodeFrame(const v1::FrameHeader& header, std::vector<grpc::Slice> payload);

// Where a frame's parts lie, from its first bytes `head` (as EncodeFrame
// lays them out: the header field, then the payload field): the end of the
// header field (head[0, header_end) alone is a valid frame without
// payload), the offset of the payload's bytes and their count. False when
// `head` does not reach the payload's bytes or is laid out otherwise.
bool FramePrefix(absl::string_view head, size_t* header_end, size_t* payload_at,
                 uint64_t* payload_size);

class DecodedFrame {
 public:
  // DataLoss naming the problem when `buffer` is not a Frame (bad tag or
  // varint, truncated field, unparsable header). Keeps references to the
  // buffer's slices, not copies. The payload is writable (a socket
  // transport gives each received message memory of its own, which this
  // frame's slices hold, so a rewrite is seen by no one else): the parsed
  // buffer must not be one whose slices the caller still reads.
  absl::Status Parse(const grpc::ByteBuffer& buffer);

  // Makes the payload `size` bytes at `data` (memory the caller keeps valid
  // and unchanged while this frame is read), for a frame whose payload lies
  // outside it (transport/shared_memory.h); read-only. REQUIRES: the parsed
  // frame carried no payload of its own.
  void SetExternalPayload(const char* data, int64_t size);

  // Records that the frame's payload, `size` bytes, was received straight
  // into memory the receiver named beforehand (client/ps_stream.h,
  // ReplyInto) and is not in this frame. REQUIRES: the parsed frame carried
  // no payload of its own.
  void SetDelivered(int64_t size) { delivered_ = size; }
  // The bytes so delivered; 0 when the payload (if any) is in the frame.
  int64_t delivered() const { return delivered_; }

  const v1::FrameHeader& header() const { return header_; }

  // The payload's bytes where they were received (base/payload.h).
  const Payload& payload() const { return payload_; }
  Payload& mutable_payload() { return payload_; }
  int64_t payload_size() const { return payload_.size(); }
  void CopyPayload(int64_t offset, int64_t n, void* dst) const { payload_.Copy(offset, n, dst); }
  void StreamPayload(int64_t offset, int64_t n, void* dst) const {
    payload_.Stream(offset, n, dst);
  }

  // Copies the payload's first `n` bytes to `dst` and removes them from the
  // payload (index data sent ahead of the tensors' bytes, TensorRef.id_count).
  // REQUIRES: 0 <= n <= payload_size().
  void TakePayloadFront(int64_t n, void* dst);

  // False after SetExternalPayload.
  bool payload_in_slices() const { return !external_; }

  // Payload bytes [offset, offset + n) as slices sharing the received
  // memory (no copy), to send it back in another frame.
  // REQUIRES: payload_in_slices(), offset + n <= payload_size().
  std::vector<grpc::Slice> PayloadSlices(int64_t offset, int64_t n) const;

 private:
  v1::FrameHeader header_;
  std::vector<grpc::Slice> slices_;
  Payload payload_;
  // Where the payload's piece i lies in slices_: the slice's index and the
  // byte within it.
  std::vector<size_t> piece_slice_;
  std::vector<size_t> piece_within_;
  bool external_ = false;
  int64_t delivered_ = 0;
};

// Thread-safe.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_free_bytes` of idle buffers.
  static std::shared_ptr<BufferPool> Create(int64_t max_free_bytes = 256 << 20);
  ~BufferPool();

  // A buffer of at least `size` bytes. Write into data(), then give it to
  // gRPC with ToSlice(); it comes back to the pool when gRPC lets go.
  class Buffer {
   public:
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&&) = delete;
    ~Buffer();
    char* data() { return block_->bytes.get(); }
    size_t size() const { return size_; }
    // Sends only the first `size` bytes. REQUIRES: size <= size().
    void Shrink(size_t size) { size_ = size; }
    grpc::Slice ToSlice() &&;

   private:
    friend class BufferPool;
    struct Block {
      std::shared_ptr<BufferPool> pool;
      std::unique_ptr<char[]> bytes;
      size_t capacity = 0;
    };
    Buffer(Block* block, size_t size) : block_(block), size_(size) {}
    static void Release(void* block);
    Block* block_;
    size_t size_;
  };

  Buffer Acquire(size_t size) ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes held by idle buffers (for tests and stats).
  int64_t free_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit BufferPool(int64_t max_free_bytes) : max_free_bytes_(max_free_bytes) {}
  void Return(Buffer::Block* block) ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t max_free_bytes_;
  mutable absl::Mutex mu_;
  std::vector<Buffer::Block*> free_ ABSL_GUARDED_BY(mu_);
  int64_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_WIRE_FRAME_H_
