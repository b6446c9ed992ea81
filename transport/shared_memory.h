// Shared memory between a worker and a PS on the same host, so the tensor
// bytes of an Exchange frame skip the loopback socket (two kernel copies and
// gRPC's framing each way) and are copied once into memory both processes
// map. The frames themselves still travel on the gRPC stream: they say where
// in the region a payload lies, and the stream's ordering is the only
// synchronisation needed.
//
//   - SharedRegion: a POSIX shared memory object (shm_open), mapped. The
//     client Creates one per stream (mode 0600, so only its own user may open
//     it) with a random token in its first 8 bytes; the PS Opens it by name
//     and checks the token, which fails on another host or in a container
//     with its own /dev/shm: the stream then carries payloads inline. The
//     client unlinks the name once the PS has answered, so nothing is left
//     in /dev/shm after a crash of either side past that point.
//   - RegionRing: which bytes of a region are in use by frames in flight.
//     Frames are answered in the order they were sent, so space is taken at
//     the head and given back at the tail, like a ring.
#ifndef PSTRAIN_TRANSPORT_SHARED_MEMORY_H_
#define PSTRAIN_TRANSPORT_SHARED_MEMORY_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

class SharedRegion {
 public:
  // Payloads start here; bytes [0, 8) hold the token.
  static constexpr int64_t kDataStart = 64;

  // A new object of `bytes` (> kDataStart) bytes named
  // "/pstrain-<pid>-<random>", mapped read-write, with a fresh token.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(int64_t bytes);
  // Maps the object `name` made by another process. FailedPrecondition
  // naming the object when it does not exist here, is not `bytes` long, or
  // does not start with `token`.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Open(const std::string& name,
                                                            int64_t bytes, uint64_t token);
  ~SharedRegion();  // unmaps; unlinks the name if Create made it and it is still linked
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Removes the name (the memory stays while mapped). Idempotent.
  void Unlink();

  const std::string& name() const { return name_; }
  int64_t size() const { return size_; }
  uint64_t token() const { return token_; }
  char* data() const { return data_; }

  // True when [offset, offset + n) lies within [kDataStart, size()).
  bool Contains(int64_t offset, int64_t n) const {
    return offset >= kDataStart && n >= 0 && offset <= size_ && n <= size_ - offset;
  }

 private:
  SharedRegion(std::string name, int64_t size, uint64_t token, char* data, bool owner)
      : name_(std::move(name)), size_(size), token_(token), data_(data), linked_(owner) {}

  const std::string name_;
  const int64_t size_;
  const uint64_t token_;
  char* const data_;
  bool linked_;  // Create made it and Unlink has not run
};

// Not thread-safe: the owner serialises calls.
class RegionRing {
 public:
  // Manages [begin, end).
  RegionRing(int64_t begin, int64_t end) : begin_(begin), end_(end) {}

  // The offset of `n` contiguous free bytes (rounded up to 64), or nullopt
  // when they do not fit now; n > 0.
  std::optional<int64_t> Allocate(int64_t n);
  // Gives back the oldest allocation still held. REQUIRES: one is held.
  void FreeOldest();
  int64_t held() const { return static_cast<int64_t>(held_.size()); }

 private:
  struct Range {
    int64_t offset;
    int64_t end;
  };
  const int64_t begin_;
  const int64_t end_;
  std::deque<Range> held_;  // oldest first
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_SHARED_MEMORY_H_
