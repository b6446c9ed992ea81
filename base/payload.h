// A byte sequence that lies in pieces of memory owned elsewhere (a received
// message's slices, a shared-memory region), read and rewritten in place
// without gathering it into one buffer. Knows nothing of where the pieces
// came from: transport/wire_frame.h fills one from a gRPC message, and the PS
// store (store/shard_store.h) reads gradients from it.
// Not thread-safe to change; reads, and rewrites of disjoint ranges, may run
// at once.
#ifndef PSTRAIN_BASE_PAYLOAD_H_
#define PSTRAIN_BASE_PAYLOAD_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace pstrain {

class Payload {
 public:
  // Empty, read-only.
  void Clear();
  // Appends `size` bytes at `data`, memory the owner keeps valid (and, while
  // only read, unchanged) as long as this payload is used.
  void Append(const char* data, int64_t size);
  // Whether the pieces may be written (RewriteFloatRuns, Write): memory that
  // no one else reads, such as a message a socket transport received.
  void set_writable(bool writable) { writable_ = writable; }
  bool writable() const { return writable_; }

  int64_t size() const { return size_; }
  // The bytes of piece `i` (in Append order). REQUIRES: i < pieces().
  size_t pieces() const { return piece_data_.size(); }
  const char* piece_data(size_t i) const { return piece_data_[i]; }

  // Copies bytes [offset, offset + n) to `dst`.
  // REQUIRES: offset + n <= size().
  void Copy(int64_t offset, int64_t n, void* dst) const;
  // The same with stores that bypass the cache (base/stream_copy.h): for
  // MiB-sized ranges copied into memory that is not read right after.
  void Stream(int64_t offset, int64_t n, void* dst) const;
  // Copies `n` bytes from `src` over bytes [offset, offset + n).
  // REQUIRES: writable(), offset + n <= size().
  void Write(int64_t offset, int64_t n, const void* src);

  // Walks the n floats stored from byte `offset` in place: fn(first, bytes,
  // count) gets floats [first, first + count) at `bytes` (unaligned),
  // count <= max_run. A float split across two pieces comes alone, from a
  // 4-byte copy. REQUIRES: offset + 4n <= size().
  template <typename Fn>
  void ForEachFloatRun(int64_t offset, int64_t n, int64_t max_run, Fn fn) const;

  // As ForEachFloatRun, but fn(first, bytes, count) gets writable bytes and
  // what it leaves there replaces those floats (a float split across two
  // pieces is written back to both). REQUIRES: writable(). Calls for
  // disjoint ranges may run at once.
  template <typename Fn>
  void RewriteFloatRuns(int64_t offset, int64_t n, int64_t max_run, Fn fn);

  // Calls fn(piece, within, len) for each contiguous stretch of bytes
  // [offset, offset + n): len bytes from byte `within` of piece number
  // `piece` (in Append order). REQUIRES: offset + n <= size().
  template <typename Fn>
  void ForEachPiece(int64_t offset, int64_t n, Fn fn) const;

 private:
  // The piece holding byte `offset`: the last one starting at or before it.
  size_t PieceAt(int64_t offset) const {
    return std::upper_bound(piece_offset_.begin(), piece_offset_.end(), offset) -
           piece_offset_.begin() - 1;
  }

  // Piece i starts at byte piece_offset_[i] and is piece_size_[i] bytes at
  // piece_data_[i].
  std::vector<const char*> piece_data_;
  std::vector<int64_t> piece_size_;
  std::vector<int64_t> piece_offset_;
  int64_t size_ = 0;
  bool writable_ = false;
};

template <typename Fn>
void Payload::ForEachPiece(int64_t offset, int64_t n, Fn fn) const {
  if (n <= 0) return;
  size_t i = PieceAt(offset);
  while (n > 0) {
    const int64_t within = offset - piece_offset_[i];
    const int64_t here = std::min(n, piece_size_[i] - within);
    fn(i, within, here);
    offset += here;
    n -= here;
    ++i;
  }
}

template <typename Fn>
void Payload::ForEachFloatRun(int64_t offset, int64_t n, int64_t max_run, Fn fn) const {
  if (n <= 0) return;
  size_t i = PieceAt(offset);
  int64_t first = 0;
  while (first < n) {
    const int64_t within = offset - piece_offset_[i];
    const int64_t left = piece_size_[i] - within;
    if (left < 4) {
      char split[4];
      Copy(offset, 4, split);
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
void Payload::RewriteFloatRuns(int64_t offset, int64_t n, int64_t max_run, Fn fn) {
  ForEachFloatRun(offset, n, max_run, [&](int64_t first, const char* bytes, int64_t count) {
    if (count > 1) {  // a run within one piece: the payload's own bytes
      fn(first, const_cast<char*>(bytes), count);
      return;
    }
    // One float, which may lie across two pieces and come from a copy.
    char one[4];
    std::memcpy(one, bytes, 4);
    fn(first, one, int64_t{1});
    Write(offset + 4 * first, 4, one);
  });
}

}  // namespace pstrain

#endif  // PSTRAIN_BASE_PAYLOAD_H_
