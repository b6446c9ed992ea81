#include "client/frame_coding.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/bfloat16.h"
#include "base/parallel_for.h"

namespace pstrain::client {
namespace {

// Pulled slices this large are copied by several cores.
constexpr int64_t kParallelCopyBytes = 1 << 20;

// Pushed rows in at most this many runs are sent from the caller's memory,
// a slice per run; more are gathered into one buffer.
constexpr size_t kMaxBorrowedRuns = 4;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "table ids go into the payload as little-endian int64s as they lie in memory");

// Bytes on the wire of `float_bytes` of float32 values.
int64_t WireBytes(int64_t float_bytes, bool bfloat16) {
  return bfloat16 ? float_bytes / 2 : float_bytes;
}

// `n` floats at `values` as a slice of bfloat16s in a pooled buffer.
grpc::Slice Bfloat16Slice(BufferPool& pool, const float* values, int64_t n) {
  BufferPool::Buffer buf = pool.Acquire(static_cast<size_t>(2 * n));
  FloatsToBfloat16(values, n, buf.data());
  return std::move(buf).ToSlice();
}

// Names `ids` in `r` and puts a copy of them in the frame's payload as raw
// bytes (TensorRef.id_count). A copy, not a borrow: the ids may be freed
// before the sending thread has let go of what it sent.
void AddPayloadIds(absl::Span<const int64_t> ids, v1::TensorRef* r,
                   std::vector<grpc::Slice>* payload) {
  if (ids.empty()) return;
  r->set_id_count(static_cast<int64_t>(ids.size()));
  payload->emplace_back(ids.data(), ids.size() * sizeof(int64_t));
}

// Consecutive rows of a table ref in the caller's array: `rows` rows from
// position `pos`, the `at`-th row onwards of the ref.
struct RowRun {
  size_t pos = 0;
  size_t at = 0;
  size_t rows = 0;
};

std::vector<RowRun> RowRuns(const TableRef& t) {
  if (t.ids.empty()) return {};
  if (t.positions.empty()) return {{0, 0, t.ids.size()}};
  std::vector<RowRun> runs;
  for (size_t k = 0; k < t.positions.size(); ++k) {
    if (!runs.empty() && runs.back().pos + runs.back().rows == t.positions[k]) {
      ++runs.back().rows;
    } else {
      runs.push_back({t.positions[k], k, 1});
    }
  }
  return runs;
}

// The pushed rows of `t` as payload slices.
void AddPushedRows(const TableRef& t, bool bfloat16, BufferPool& pool,
                   std::vector<grpc::Slice>* payload) {
  if (t.ids.empty()) return;
  const int64_t dim = t.dim;
  const std::vector<RowRun> runs = RowRuns(t);
  if (bfloat16) {
    // The rows gathered into one buffer as they are narrowed.
    BufferPool::Buffer buf = pool.Acquire(t.ids.size() * dim * 2);
    for (const RowRun& run : runs) {
      FloatsToBfloat16(t.grads + run.pos * dim, run.rows * dim, buf.data() + run.at * dim * 2);
    }
    payload->push_back(std::move(buf).ToSlice());
    return;
  }
  // Rows that sit side by side in the caller's gradients (one PS's ids: all
  // of them) go as one slice; rows spread over many runs (ids hashed over
  // several PS) are gathered into one buffer, a copy that costs less than
  // a slice per row.
  if (runs.size() <= kMaxBorrowedRuns) {
    for (const RowRun& run : runs) {
      payload->push_back(BorrowSlice(t.grads + run.pos * dim, run.rows * dim * 4));
    }
    return;
  }
  BufferPool::Buffer buf = pool.Acquire(t.ids.size() * dim * 4);
  for (const RowRun& run : runs) {
    std::memcpy(buf.data() + run.at * dim * 4, t.grads + run.pos * dim, run.rows * dim * 4);
  }
  payload->push_back(std::move(buf).ToSlice());
}

}  // namespace

void EncodeDense(absl::Span<const DenseSlice> slices, bool bfloat16, BufferPool& pool,
                 v1::FrameHeader* h, std::vector<grpc::Slice>* payload, ReplyInto* reply_into) {
  for (const DenseSlice& s : slices) {
    // bfloat16 on the wire: half the bytes; a pull's values land in the
    // first half of their floats and are widened in place (DecodeDense).
    const int64_t wire_bytes = WireBytes(s.bytes, bfloat16);
    if (s.grads != nullptr) {
      v1::TensorRef* r = h->add_push();
      r->set_key(s.key);
      r->set_bytes(wire_bytes);
      r->set_version(s.version);
      payload->push_back(bfloat16 ? Bfloat16Slice(pool, s.grads, s.bytes / 4)
                                  : BorrowSlice(s.grads, s.bytes));
    }
    if (s.values != nullptr) {
      h->add_pull()->set_key(s.key);
      reply_into->push_back({reinterpret_cast<char*>(s.values), wire_bytes});
    }
  }
}

absl::Status DecodeDense(const DecodedFrame& f, absl::Span<const DenseSlice> slices,
                         bool bfloat16, absl::string_view ps, std::vector<int64_t>* versions) {
  int pulled = 0;
  for (const DenseSlice& s : slices) pulled += s.values != nullptr;
  if (f.header().pull_size() != pulled) {
    return absl::InternalError(absl::StrCat(ps, ": pull returned ", f.header().pull_size(),
                                            " tensors for ", pulled, " slices"));
  }
  versions->resize(slices.size());
  // Received straight into place (client/ps_stream.h, ReplyInto) or in the
  // frame: the sizes are checked either way.
  const int64_t received = f.delivered() > 0 ? f.delivered() : f.payload_size();
  int64_t at = 0;
  int k = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    const DenseSlice& s = slices[i];
    if (s.values == nullptr) continue;
    const v1::TensorRef& r = f.header().pull(k++);
    const int64_t wire_bytes = WireBytes(s.bytes, bfloat16);
    if (r.bytes() != wire_bytes || at + r.bytes() > received) {
      return absl::InternalError(absl::StrCat(ps, ": pull of ", s.key, " returned ", r.bytes(),
                                              " bytes, expected ", wire_bytes));
    }
    char* dst = reinterpret_cast<char*>(s.values);
    if (bfloat16) {
      if (f.delivered() == 0) f.CopyPayload(at, r.bytes(), dst);
      Bfloat16ToFloats(dst, r.bytes() / 2, dst);
    } else if (f.delivered() > 0) {
      // Already in place.
    } else if (r.bytes() >= kParallelCopyBytes) {
      // Large slices are copied by several cores (base/parallel_for.h),
      // with streaming stores: the caller's parameters were last written a
      // step ago, so a plain copy would first read every line of them back
      // from memory.
      const int64_t from = at;
      ParallelFor(r.bytes(), kParallelCopyBytes,
                  [&](int64_t b, int64_t e) { f.StreamPayload(from + b, e - b, dst + b); });
    } else {
      f.CopyPayload(at, r.bytes(), dst);
    }
    at += r.bytes();
    (*versions)[i] = r.version();
  }
  return absl::OkStatus();
}

int64_t EncodeRows(absl::Span<const TableRef> push, absl::Span<const TableRef> pull,
                   bool bfloat16, BufferPool& pool, v1::FrameHeader* h,
                   std::vector<grpc::Slice>* payload) {
  // Every ref's ids first, push refs then pull refs, then the pushed rows
  // (TensorRef.id_count).
  for (const TableRef& t : push) {
    v1::TensorRef* r = h->add_push();
    r->set_key(t.table);
    r->set_version(t.version);
    r->set_bytes(WireBytes(static_cast<int64_t>(t.ids.size()) * t.dim * 4, bfloat16));
    AddPayloadIds(t.ids, r, payload);
  }
  int64_t pull_bytes = 0;
  for (const TableRef& t : pull) {
    v1::TensorRef* r = h->add_pull();
    r->set_key(t.table);
    AddPayloadIds(t.ids, r, payload);
    pull_bytes += static_cast<int64_t>(t.ids.size()) * t.dim * 4;
  }
  for (const TableRef& t : push) AddPushedRows(t, bfloat16, pool, payload);
  return pull_bytes;
}

absl::Status DecodeRows(const DecodedFrame& f, absl::Span<const TableRef> pull, bool bfloat16,
                        absl::string_view ps, std::vector<int64_t>* versions) {
  int64_t expected = 0;
  for (const TableRef& t : pull) {
    expected += WireBytes(static_cast<int64_t>(t.ids.size()) * t.dim * 4, bfloat16);
  }
  if (f.payload_size() != expected) {
    return absl::InternalError(absl::StrCat(ps, ": pull of ", pull.size(),
                                            " tables' rows returned ", f.payload_size(),
                                            " bytes, expected ", expected));
  }
  versions->resize(pull.size());
  // The rows of each table in the order the refs named them.
  int64_t at = 0;
  for (size_t t = 0; t < pull.size(); ++t) {
    if (static_cast<int>(t) < f.header().pull_size()) {
      (*versions)[t] = f.header().pull(static_cast<int>(t)).version();
    }
    const int64_t dim = pull[t].dim;
    const int64_t row_bytes = WireBytes(dim * 4, bfloat16);
    for (const RowRun& run : RowRuns(pull[t])) {
      float* out = pull[t].out + run.pos * dim;
      f.CopyPayload(at, run.rows * row_bytes, out);
      if (bfloat16) Bfloat16ToFloats(out, run.rows * dim, out);
      at += run.rows * row_bytes;
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::client
