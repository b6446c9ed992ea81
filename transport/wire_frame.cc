#include "transport/wire_frame.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/varint.h"

namespace pstrain {
namespace {

constexpr uint8_t kHeaderTag = (1 << 3) | 2;   // field 1, length-delimited
constexpr uint8_t kPayloadTag = (2 << 3) | 2;  // field 2, length-delimited

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads the frame's bytes in order across the received slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip(); }
  bool done() const { return index_ == slices_.size(); }
  size_t index() const { return index_; }
  size_t offset() const { return offset_; }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Copies n bytes out; false when fewer remain.
  bool Read(uint64_t n, std::string* out) {
    out->clear();
    while (n > 0) {
      if (done()) return false;
      const size_t here = std::min<uint64_t>(n, slices_[index_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[index_].begin()) + offset_, here);
      Advance(here);
      n -= here;
    }
    return true;
  }
  // Calls fn(ptr, len, slice, offset) over the next n bytes without
  // copying: len bytes at ptr, which is byte `offset` of slices[slice].
  template <typename Fn>
  bool Walk(uint64_t n, Fn fn) {
    while (n > 0) {
      if (done()) return false;
      const size_t here = std::min<uint64_t>(n, slices_[index_].size() - offset_);
      fn(reinterpret_cast<const char*>(slices_[index_].begin()) + offset_, here, index_, offset_);
      Advance(here);
      n -= here;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    Skip();
  }
  // Moves past exhausted (or empty) slices.
  void Skip() {
    while (index_ < slices_.size() && offset_ >= slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

}  // namespace

grpc::Slice BorrowSlice(const void* data, size_t size) {
  return grpc::Slice(data, size, grpc::Slice::STATIC_SLICE);
}

bool FramePrefix(absl::string_view head, size_t* header_end, size_t* payload_at,
                 uint64_t* payload_size) {
  size_t at = 0;
  uint64_t len = 0;
  if (head.empty() || static_cast<uint8_t>(head[at++]) != kHeaderTag) return false;
  if (!ReadVarint(head, &at, &len) || len > head.size() - at) return false;
  *header_end = at + len;
  at = *header_end;
  if (at >= head.size() || static_cast<uint8_t>(head[at++]) != kPayloadTag) return false;
  if (!ReadVarint(head, &at, payload_size)) return false;
  *payload_at = at;
  return true;
}

grpc::ByteBuffer EncodeFrame(const v1::FrameHeader& header, std::vector<grpc::Slice> payload) {
  std::string head;
  const size_t header_size = header.ByteSizeLong();
  head.reserve(header_size + 24);
  head.push_back(static_cast<char>(kHeaderTag));
  PutVarint(header_size, &head);
  const size_t at = head.size();
  head.resize(at + header_size);
  header.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(&head[at]));
  uint64_t payload_size = 0;
  for (const grpc::Slice& s : payload) payload_size += s.size();
  if (payload_size > 0) {
    head.push_back(static_cast<char>(kPayloadTag));
    PutVarint(payload_size, &head);
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(payload.size() + 1);
  slices.emplace_back(head);
  for (grpc::Slice& s : payload) {
    if (s.size() > 0) slices.push_back(std::move(s));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::Status DecodedFrame::Parse(const grpc::ByteBuffer& buffer) {
  header_.Clear();
  slices_.clear();
  payload_.Clear();
  piece_slice_.clear();
  piece_within_.clear();
  external_ = false;
  delivered_ = 0;
  grpc::Status dumped = buffer.Dump(&slices_);
  if (!dumped.ok()) {
    return absl::DataLossError(absl::StrCat("frame: ", dumped.error_message()));
  }
  SliceCursor cursor(slices_);
  bool seen_header = false, seen_payload = false;
  std::string header_bytes;
  while (!cursor.done()) {
    uint8_t tag;
    uint64_t len;
    if (!cursor.ReadByte(&tag) || !cursor.ReadVarint(&len)) {
      return absl::DataLossError("frame: truncated field tag or length");
    }
    if (tag == kHeaderTag && !seen_header) {
      seen_header = true;
      if (!cursor.Read(len, &header_bytes)) {
        return absl::DataLossError(absl::StrCat("frame: header of ", len, " bytes is truncated"));
      }
      if (!header_.ParseFromString(header_bytes)) {
        return absl::DataLossError("frame: header is not a valid FrameHeader");
      }
    } else if (tag == kPayloadTag && !seen_payload) {
      seen_payload = true;
      const bool whole =
          cursor.Walk(len, [&](const char* p, size_t n, size_t slice, size_t within) {
            payload_.Append(p, static_cast<int64_t>(n));
            piece_slice_.push_back(slice);
            piece_within_.push_back(within);
          });
      if (!whole) {
        return absl::DataLossError(absl::StrCat("frame: payload of ", len, " bytes is truncated"));
      }
      payload_.set_writable(true);
    } else {
      return absl::DataLossError(absl::StrCat("frame: unexpected field tag ", tag,
                                              " (a Frame holds one header and one payload)"));
    }
  }
  return absl::OkStatus();
}

std::vector<grpc::Slice> DecodedFrame::PayloadSlices(int64_t offset, int64_t n) const {
  std::vector<grpc::Slice> out;
  if (n <= 0) return out;
  payload_.ForEachPiece(offset, n, [&](size_t i, int64_t within, int64_t len) {
    const size_t begin = piece_within_[i] + within;
    out.push_back(slices_[piece_slice_[i]].sub(begin, begin + len));
  });
  return out;
}

void DecodedFrame::TakePayloadFront(int64_t n, void* dst) {
  if (n <= 0) return;
  payload_.Copy(0, n, dst);
  Payload rest;
  rest.set_writable(payload_.writable());
  std::vector<size_t> rest_slice;
  std::vector<size_t> rest_within;
  payload_.ForEachPiece(n, payload_.size() - n, [&](size_t i, int64_t within, int64_t len) {
    rest.Append(payload_.piece_data(i) + within, len);
    if (i < piece_slice_.size()) {
      rest_slice.push_back(piece_slice_[i]);
      rest_within.push_back(piece_within_[i] + static_cast<size_t>(within));
    }
  });
  payload_ = std::move(rest);
  piece_slice_ = std::move(rest_slice);
  piece_within_ = std::move(rest_within);
}

void DecodedFrame::SetExternalPayload(const char* data, int64_t size) {
  payload_.Clear();
  piece_slice_.clear();
  piece_within_.clear();
  external_ = true;
  payload_.Append(data, size);
}

std::shared_ptr<BufferPool> BufferPool::Create(int64_t max_free_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_free_bytes));
}

BufferPool::Buffer BufferPool::Acquire(size_t size) {
  Buffer::Block* block = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // The smallest idle buffer that fits.
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i]->capacity >= size &&
          (best == free_.size() || free_[i]->capacity < free_[best]->capacity)) {
        best = i;
      }
    }
    if (best != free_.size()) {
      block = free_[best];
      free_[best] = free_.back();
      free_.pop_back();
      free_bytes_ -= block->capacity;
    }
  }
  if (block == nullptr) {
    block = new Buffer::Block;
    block->capacity = std::max<size_t>(size, 64);
    block->bytes.reset(new char[block->capacity]);
  }
  block->pool = shared_from_this();
  return Buffer(block, size);
}

void BufferPool::Return(Buffer::Block* block) {
  {
    absl::MutexLock lock(&mu_);
    free_.push_back(block);
    free_bytes_ += block->capacity;
    // Over the cap: let go of the largest idle buffer.
    while (free_bytes_ > max_free_bytes_ && !free_.empty()) {
      auto largest = std::max_element(free_.begin(), free_.end(),
                                      [](auto* a, auto* b) { return a->capacity < b->capacity; });
      Buffer::Block* drop = *largest;
      free_bytes_ -= drop->capacity;
      free_.erase(largest);
      delete drop;
    }
  }
}

BufferPool::~BufferPool() {
  for (Buffer::Block* b : free_) delete b;
}

int64_t BufferPool::free_bytes() const {
  absl::MutexLock lock(&mu_);
  return free_bytes_;
}

BufferPool::Buffer::Buffer(Buffer&& other) noexcept : block_(other.block_), size_(other.size_) {
  other.block_ = nullptr;
}

BufferPool::Buffer::~Buffer() {
  if (block_ != nullptr) Release(block_);
}

void BufferPool::Buffer::Release(void* p) {
  auto* block = static_cast<Block*>(p);
  // The block holds the pool alive while lent out; an idle block must not
  // (the pool owns it then), so move the reference out first.
  std::shared_ptr<BufferPool> pool = std::move(block->pool);
  pool->Return(block);
}

grpc::Slice BufferPool::Buffer::ToSlice() && {
  Block* block = block_;
  block_ = nullptr;
  return grpc::Slice(block->bytes.get(), size_, &Buffer::Release, block);
}

}  // namespace pstrain
