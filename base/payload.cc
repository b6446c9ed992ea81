#include "base/payload.h"

#include "base/stream_copy.h"

namespace pstrain {

void Payload::Clear() {
  piece_data_.clear();
  piece_size_.clear();
  piece_offset_.clear();
  size_ = 0;
  writable_ = false;
}

void Payload::Append(const char* data, int64_t size) {
  if (size <= 0) return;
  piece_data_.push_back(data);
  piece_size_.push_back(size);
  piece_offset_.push_back(size_);
  size_ += size;
}

void Payload::Copy(int64_t offset, int64_t n, void* dst) const {
  char* out = static_cast<char*>(dst);
  ForEachPiece(offset, n, [&](size_t i, int64_t within, int64_t len) {
    std::memcpy(out, piece_data_[i] + within, len);
    out += len;
  });
}

void Payload::Stream(int64_t offset, int64_t n, void* dst) const {
  char* out = static_cast<char*>(dst);
  ForEachPiece(offset, n, [&](size_t i, int64_t within, int64_t len) {
    StreamCopy(out, piece_data_[i] + within, len);
    out += len;
  });
}

void Payload::Write(int64_t offset, int64_t n, const void* src) {
  const char* from = static_cast<const char*>(src);
  ForEachPiece(offset, n, [&](size_t i, int64_t within, int64_t len) {
    std::memcpy(const_cast<char*>(piece_data_[i]) + within, from, len);
    from += len;
  });
}

}  // namespace pstrain
