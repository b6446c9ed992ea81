// Frames of the PS data path (proto/ps_service.proto, message Frame) built and
// parsed straight on gRPC byte buffers, so tensor bytes are never copied into
// or out of protobuf strings:
//   - EncodeFrame lays out the protobuf encoding of Frame as a small slice
//     (field tags, lengths, the serialized header) followed by the caller's
//     payload slices, which gRPC writes to the socket without copying.
//   - DecodedFrame parses a received buffer: the header is parsed with
//     protobuf, the payload stays in gRPC's received slices until the caller
//     copies (or reads in place) the ranges it needs; a server may also
//     rewrite it in place and send those slices back as its answer.
//   - BufferPool hands out reusable byte buffers as gRPC slices; a buffer
//     returns to the pool when gRPC releases the slice, so steady traffic
//     allocates nothing at MiB sizes.
// The encoding is exactly protobuf's, so any gRPC client may speak it with the
// generated Frame message.
#ifndef PSTRAIN_COMMON_WIRE_FRAME_H_
#define PSTRAIN_COMMON_WIRE_FRAME_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/ps_service.pb.h"

namespace pstrain {

// A slice that points at caller memory without copying or owning it: the
// memory must stay unchanged until gRPC is done with the message (for a
// client, until the call's write completes).
grpc::Slice BorrowSlice(const void* data, size_t size);

// Frame{header, payload = concatenation of `payload`}.
grpc::ByteBuffer EncodeFrame(const v1::FrameHeader& header,
                             std::vector<grpc::Slice> payload);

class DecodedFrame {
 public:
  // DataLoss naming the problem when `buffer` is not a Frame (bad tag or
  // varint, truncated field, unparsable header). Keeps references to the
  // buffer's slices, not copies.
  absl::Status Parse(const grpc::ByteBuffer& buffer);

  // Makes the payload `size` bytes at `data` (memory the caller keeps valid
  // and unchanged while this frame is read), for a frame whose payload lies
  // outside it (common/shared_memory.h). REQUIRES: the parsed frame carried
  // no payload of its own.
  void SetExternalPayload(const char* data, int64_t size);

  const v1::FrameHeader& header() const { return header_; }
  int64_t payload_size() const { return payload_size_; }

  // Copies payload bytes [offset, offset + n) to `dst`.
  // REQUIRES: offset + n <= payload_size().
  void CopyPayload(int64_t offset, int64_t n, void* dst) const;
  // The same with stores that bypass the cache (common/stream_copy.h): for
  // MiB-sized ranges copied into memory that is not read right after.
  void StreamPayload(int64_t offset, int64_t n, void* dst) const;

  // Walks the n floats stored from payload byte `offset` in place:
  // fn(first, bytes, count) gets floats [first, first + count) at `bytes`
  // (unaligned), count <= max_run. A float split across two received slices
  // comes alone, from a 4-byte copy. REQUIRES: offset + 4n <= payload_size().
  template <typename Fn>
  void ForEachFloatRun(int64_t offset, int64_t n, int64_t max_run, Fn fn) const;

  // As ForEachFloatRun, but fn(first, bytes, count) gets writable bytes and
  // what it leaves there replaces those floats in the payload (a float split
  // across two slices is written back to both). Used to answer a request in
  // the memory it arrived in: a socket transport gives each received
  // message memory of its own, which this frame's slices hold, so nothing
  // else sees the change. REQUIRES: the buffer parsed came from a socket
  // (not from slices the caller still uses), its payload in its slices
  // (payload_in_slices()). Calls for disjoint ranges may run at once.
  template <typename Fn>
  void RewriteFloatRuns(int64_t offset, int64_t n, int64_t max_run, Fn fn);

  // False after SetExternalPayload.
  bool payload_in_slices() const { return !external_; }

  // Payload bytes [offset, offset + n) as slices sharing the received
  // memory (no copy), to send it back in another frame.
  // REQUIRES: payload_in_slices(), offset + n <= payload_size().
  std::vector<grpc::Slice> PayloadSlices(int64_t offset, int64_t n) const;

 private:
  // Calls fn(piece, within, len) for each contiguous stretch of payload
  // bytes [offset, offset + n): len bytes from byte `within` of piece `piece`.
  template <typename Fn>
  void ForEachPiece(int64_t offset, int64_t n, Fn fn) const;
  // Copies `n` bytes from `src` over payload bytes [offset, offset + n).
  void WritePayload(int64_t offset, int64_t n, const void* src);
  // Payload bytes [offset, offset + n) to `dst`, each piece by
  // copy(to, from, len): CopyPayload and StreamPayload.
  template <typename Copy>
  void CopyOut(int64_t offset, int64_t n, void* dst, Copy copy) const;

  v1::FrameHeader header_;
  std::vector<grpc::Slice> slices_;
  // The payload as pieces of slices_: piece i starts at payload offset
  // piece_offset_[i] and is piece_[i] bytes at piece_data_[i].
  std::vector<const char*> piece_data_;
  std::vector<int64_t> piece_size_;
  std::vector<int64_t> piece_offset_;
  // Where piece i lies in slices_: the slice's index and the byte within it.
  std::vector<size_t> piece_slice_;
  std::vector<size_t> piece_within_;
  int64_t payload_size_ = 0;
  bool external_ = false;
};

template <typename Fn>
void DecodedFrame::ForEachFloatRun(int64_t offset, int64_t n, int64_t max_run, Fn fn) const {
  if (n <= 0) return;
  // The piece holding `offset`: the last one starting at or before it.
  size_t i = std::upper_bound(piece_offset_.begin(), piece_offset_.end(), offset) -
             piece_offset_.begin() - 1;
  int64_t first = 0;
  while (first < n) {
    const int64_t within = offset - piece_offset_[i];
    const int64_t left = piece_size_[i] - within;
    if (left < 4) {
      char split[4];
      CopyPayload(offset, 4, split);
      fn(first, static_cast<const char*>(split), int64_t{1});
      first += 1;
      offset += 4;
    } else {
      const int64_t count = std::min({left / 4, n - first, max_run});
      fn(first, piece_data_[i] + within, count);
      first += count;
      offset += 4 * count;
    }
    while (i + 1 < piece_offset_.size() && piece_offset_[i + 1] <= offset) ++i;
  }
}

template <typename Fn>
void DecodedFrame::RewriteFloatRuns(int64_t offset, int64_t n, int64_t max_run, Fn fn) {
  ForEachFloatRun(offset, n, max_run, [&](int64_t first, const char* bytes, int64_t count) {
    if (count > 1) {  // a run within one slice: the payload's own bytes
      fn(first, const_cast<char*>(bytes), count);
      return;
    }
    // One float, which may lie across two slices and come from a copy.
    char one[4];
    std::memcpy(one, bytes, 4);
    fn(first, one, int64_t{1});
    WritePayload(offset + 4 * first, 4, one);
  });
}

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

#endif  // PSTRAIN_COMMON_WIRE_FRAME_H_
