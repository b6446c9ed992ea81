#include "ps_server/exchange_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/bfloat16.h"

namespace pstrain::ps {

std::vector<ShardStore::TensorRef> RefsOf(
    const google::protobuf::RepeatedPtrField<v1::TensorRef>& refs) {
  std::vector<ShardStore::TensorRef> out(refs.size());
  for (int i = 0; i < refs.size(); ++i) {
    out[i].key = refs[i].key();
    out[i].ids = absl::MakeConstSpan(refs[i].ids().data(), refs[i].ids_size());
    out[i].version = refs[i].version();
    out[i].bytes = refs[i].bytes();
  }
  return out;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "payload ids are read as little-endian int64s in place");

absl::Status FrameRefs(DecodedFrame* frame, std::vector<int64_t>* ids,
                       std::vector<ShardStore::TensorRef>* push,
                       std::vector<ShardStore::TensorRef>* pull) {
  const v1::FrameHeader& h = frame->header();
  const int64_t room = frame->payload_size() / 8;
  int64_t total = 0;
  for (const auto* refs : {&h.push(), &h.pull()}) {
    for (const v1::TensorRef& r : *refs) {
      if (r.id_count() == 0) continue;
      if (r.id_count() < 0 || r.id_count() > room - total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", r.key(), "' names ", r.id_count(), " ids in the payload, but ",
            r.id_count() < 0 ? "a count cannot be negative"
                             : absl::StrCat("the payload holds ", frame->payload_size(), " bytes (",
                                            room - total, " more ids at most)")));
      }
      if (r.ids_size() > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", r.key(), "' carries ids both in its header and in the payload"));
      }
      total += r.id_count();
    }
  }
  ids->resize(static_cast<size_t>(total));
  frame->TakePayloadFront(total * 8, ids->data());
  *push = RefsOf(h.push());
  *pull = RefsOf(h.pull());
  const int64_t* next = ids->data();
  for (auto [refs, out] : {std::pair{&h.push(), push}, std::pair{&h.pull(), pull}}) {
    for (int i = 0; i < refs->size(); ++i) {
      const int64_t n = (*refs)[i].id_count();
      if (n == 0) continue;
      (*out)[i].ids = absl::MakeConstSpan(next, static_cast<size_t>(n));
      next += n;
    }
  }
  return absl::OkStatus();
}

namespace {

// The destroy callback of a held slice: user data is the heap-held hold.
void DropHold(void* hold) { delete static_cast<std::shared_ptr<const void>*>(hold); }

}  // namespace

std::vector<grpc::Slice> HeldSlices(std::vector<HeldBytes> held) {
  std::vector<grpc::Slice> slices;
  slices.reserve(held.size());
  for (HeldBytes& h : held) {
    slices.emplace_back(const_cast<char*>(h.data), static_cast<size_t>(h.size), &DropHold,
                        new std::shared_ptr<const void>(std::move(h.hold)));
  }
  return slices;
}

grpc::ByteBuffer ErrorFrame(uint64_t id, const absl::Status& s) {
  v1::FrameHeader h;
  h.set_request_id(id);
  h.set_code(static_cast<int>(s.code()));
  h.set_message(std::string(s.message()));
  return EncodeFrame(h, {});
}

ExchangeSession::ExchangeSession(ShardStore* store, std::shared_ptr<BufferPool> pool,
                                 ExchangeLimits limits, Respond respond,
                                 WaitElsewhere wait_elsewhere)
    : store_(store),
      pool_(std::move(pool)),
      limits_(limits),
      respond_(std::move(respond)),
      wait_elsewhere_(std::move(wait_elsewhere)) {}

void ExchangeSession::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  store_->wait_list().Notify();  // lets a parked pull give up now
}

void ExchangeSession::Handle(const grpc::ByteBuffer& in) {
  absl::Status parsed = request_.Parse(in);
  const v1::FrameHeader& h = request_.header();
  if (!parsed.ok()) return respond_(ErrorFrame(h.request_id(), parsed));
  if (h.has_shm_attach()) return respond_(Attach(h));
  absl::Status within = CheckLimits(h);
  if (!within.ok()) return respond_(ErrorFrame(h.request_id(), within));
  absl::Status shared = UseSharedRegion(h);
  if (!shared.ok()) return respond_(ErrorFrame(h.request_id(), shared));
  std::vector<ShardStore::TensorRef> pushed;
  pull_ = ShardStore::PullBatch();
  absl::Status refs = FrameRefs(&request_, &ids_, &pushed, &pull_.tensors);
  if (!refs.ok()) return respond_(ErrorFrame(h.request_id(), refs));
  if (h.wire_dtype() != v1::FLOAT32 && h.wire_dtype() != v1::BFLOAT16) {
    return respond_(ErrorFrame(h.request_id(), absl::InvalidArgumentError(absl::StrCat(
                                                   "unknown wire_dtype ", h.wire_dtype(),
                                                   " (FLOAT32 = 0 and BFLOAT16 = 1 are known)"))));
  }
  bfloat16_ = h.wire_dtype() == v1::BFLOAT16;
  v1::FrameHeader resp;
  resp.set_request_id(h.request_id());
  pull_.replica = h.replica();
  pull_.generation = h.generation();
  pull_.min_step = h.min_step();
  pull_.stop_step = h.stop_step();
  if (h.push_size() > 0) {
    if (!pull_.tensors.empty()) {
      // A pull the store would refuse (an id out of range, say) refuses
      // the whole frame before its push changes anything.
      absl::Status pullable = store_->PullSize(pull_).status();
      if (!pullable.ok()) return respond_(ErrorFrame(h.request_id(), pullable));
    }
    std::optional<PushHold::Pass> pass =
        wait_elsewhere_ ? store_->push_hold().TryEnter() : std::nullopt;
    if (wait_elsewhere_ && !pass.has_value()) {
      // Held by a checkpoint: the push waits for the hold's end (in the
      // store's Push) on the other thread, and the frame (kept in request_)
      // is answered there.
      wait_elsewhere_([this, pushed = std::move(pushed), resp = std::move(resp)]() mutable {
        if (!Push(request_.header(), std::move(pushed), resp, /*admitted=*/false)) {
          StartPull(std::move(resp));
        }
      });
      return;
    }
    if (Push(h, std::move(pushed), resp, pass.has_value())) return;
  } else if (request_.payload_size() != 0) {
    return respond_(ErrorFrame(h.request_id(), absl::InvalidArgumentError(absl::StrCat(
                                                   "frame carries ", request_.payload_size(),
                                                   " payload bytes but pushes nothing"))));
  }
  StartPull(std::move(resp));
}

bool ExchangeSession::Push(const v1::FrameHeader& h, std::vector<ShardStore::TensorRef> tensors,
                           v1::FrameHeader& resp, bool admitted) {
  ShardStore::PushBatch push;
  push.admitted = admitted;
  push.replica = h.replica();
  push.generation = h.generation();
  push.consistency = h.consistency();
  push.stop_step = h.stop_step();
  push.push_number = h.push_number();
  push.tensors = std::move(tensors);
  // A push-then-pull of the same async tensors: read the new values back
  // while applying, and answer at once. When the gradient came in the
  // frame, no reply buffer is filled (4 MiB less to touch per 4 MiB
  // tensor): the answer is sent from the stored values themselves (SGD) or
  // from the new values written where gRPC received the gradient
  // (PushBatch::read_back_in_payload); in shared memory, they go to the
  // reply space.
  std::optional<BufferPool::Buffer> back;
  ShardStore::PushBatch::InPlaceAnswer in_place;
  std::vector<ShardStore::Pulled> back_info;
  int64_t back_size = -1;
  bool in_frame = false;
  // bfloat16 gradients are widened into a buffer of their own first.
  const Payload* grads = &request_.payload();
  Payload widened;
  std::optional<BufferPool::Buffer> wide;
  if (bfloat16_) {
    absl::Status s = Widen(&push.tensors, &wide, &widened);
    if (!s.ok()) {
      respond_(ErrorFrame(h.request_id(), s));
      return true;
    }
    grads = &widened;
  }
  if (!pull_.tensors.empty() && store_->CanReadBack(push, pull_.tensors)) {
    auto size = store_->PullSize(pull_);
    if (size.ok()) {
      back_size = *size;
      in_frame = !bfloat16_ && request_.payload_in_slices() && reply_capacity_ == 0 &&
                 back_size == request_.payload_size();
      if (in_frame) {
        push.read_back_in_payload = &request_.mutable_payload();
        push.read_back_in_place = &in_place;
      } else {
        push.read_back = ReplyBuffer(back_size, &back);
      }
      push.read_back_versions = &back_info;
    }
  }
  auto applied = store_->Push(push, *grads);
  if (!applied.ok()) {
    respond_(ErrorFrame(h.request_id(), applied.status()));
    return true;
  }
  for (bool a : *applied) resp.add_applied(a);
  if (in_frame) {
    DescribePull(back_info, &resp);
    respond_(EncodeFrame(resp, in_place.in_payload
                                   ? request_.PayloadSlices(0, request_.payload_size())
                                   : HeldSlices(std::move(in_place.held))));
    return true;
  }
  if (back_size >= 0) {
    respond_(PullReply(std::move(resp), back_info, std::move(back), back_size));
    return true;
  }
  return false;
}

absl::Status ExchangeSession::Widen(std::vector<ShardStore::TensorRef>* tensors,
                                    std::optional<BufferPool::Buffer>* buf, Payload* widened) {
  const int64_t n = request_.payload_size();
  for (ShardStore::TensorRef& t : *tensors) {
    if (t.bytes < 0 || t.bytes > n || t.bytes % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.key, "' says ", t.bytes, " bytes of bfloat16 gradients; ",
          t.bytes % 2 != 0 ? "bfloat16s are 2 bytes each" : absl::StrCat("the payload holds ", n)));
    }
    t.bytes *= 2;
  }
  if (n % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a payload of ", n, " bytes cannot hold bfloat16 gradients (2 bytes each)"));
  }
  buf->emplace(pool_->Acquire(static_cast<size_t>(2 * n)));
  char* data = (*buf)->data();
  request_.CopyPayload(0, n, data);
  Bfloat16ToFloats(data, n / 2, data);
  widened->Append(data, 2 * n);
  widened->set_writable(true);
  return absl::OkStatus();
}

void ExchangeSession::StartPull(v1::FrameHeader resp) {
  if (pull_.tensors.empty()) {
    resp.set_global_step(store_->global_step());
    return respond_(EncodeFrame(resp, {}));
  }
  auto size = store_->PullSize(pull_);
  if (!size.ok()) return respond_(ErrorFrame(resp.request_id(), size.status()));
  pull_size_ = *size;
  pull_header_ = std::move(resp);
  store_->wait_list().RunWhenReady([this] { return TryPull(); },
                                   store_->clock()->Now() + WaitTimeout(),
                                   [this] { Expire(); });
}

absl::Status ExchangeSession::CheckLimits(const v1::FrameHeader& h) const {
  const int64_t tensors = int64_t{h.push_size()} + h.pull_size();
  if (tensors > limits_.max_tensors) {
    return absl::ResourceExhaustedError(absl::StrCat("the frame names ", tensors,
                                                     " tensors; the limit is ", limits_.max_tensors,
                                                     " per request (--max_tensors_per_request)"));
  }
  int64_t ids = 0;
  for (const auto* refs : {&h.push(), &h.pull()}) {
    for (const v1::TensorRef& r : *refs) {
      // Capped so that no count, however large, overflows the sum.
      ids += r.ids_size() + std::clamp<int64_t>(r.id_count(), 0, limits_.max_ids + 1);
      if (ids > limits_.max_ids) break;
    }
  }
  if (ids > limits_.max_ids) {
    return absl::ResourceExhaustedError(absl::StrCat("the frame names ", ids,
                                                     " table ids; the limit is ", limits_.max_ids,
                                                     " per request (--max_ids_per_request)"));
  }
  return absl::OkStatus();
}

grpc::ByteBuffer ExchangeSession::Attach(const v1::FrameHeader& h) {
  v1::FrameHeader resp;
  resp.set_request_id(h.request_id());
  const v1::SharedRegionRef& ref = h.shm_attach();
  if (!limits_.shared_memory) {
    resp.set_message("shared memory is off on this PS (--shared_memory=false)");
  } else if (shm_ != nullptr) {
    resp.set_message(absl::StrCat("the stream already has shared memory ", shm_->name()));
  } else if (ref.bytes() > limits_.max_shared_bytes) {
    resp.set_message(absl::StrCat("shared memory of ", ref.bytes(),
                                  " bytes is over this PS's limit of ", limits_.max_shared_bytes));
  } else {
    auto opened = SharedRegion::Open(ref.name(), ref.bytes(), ref.token());
    if (opened.ok()) {
      shm_ = *std::move(opened);
      resp.set_shm_attached(true);
    } else {
      resp.set_message(std::string(opened.status().message()));
    }
  }
  return EncodeFrame(resp, {});
}

absl::Status ExchangeSession::UseSharedRegion(const v1::FrameHeader& h) {
  reply_capacity_ = 0;
  const bool payload_shared = h.shm_payload_bytes() != 0 || h.shm_payload_offset() != 0;
  if (!payload_shared && h.shm_reply_capacity() == 0) return absl::OkStatus();
  if (shm_ == nullptr) {
    return absl::FailedPreconditionError(
        "the frame names shared memory, but the stream has none attached");
  }
  if (payload_shared) {
    if (request_.payload_size() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the frame carries ", request_.payload_size(),
                       " payload bytes and names a payload in shared memory too"));
    }
    if (!shm_->Contains(h.shm_payload_offset(), h.shm_payload_bytes())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the frame's payload of ", h.shm_payload_bytes(), " bytes at offset ",
          h.shm_payload_offset(), " lies outside the shared memory of ", shm_->size(), " bytes"));
    }
    request_.SetExternalPayload(shm_->data() + h.shm_payload_offset(), h.shm_payload_bytes());
  }
  if (h.shm_reply_capacity() != 0) {
    if (!shm_->Contains(h.shm_reply_offset(), h.shm_reply_capacity())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the frame's reply space of ", h.shm_reply_capacity(), " bytes at offset ",
          h.shm_reply_offset(), " lies outside the shared memory of ", shm_->size(), " bytes"));
    }
    reply_offset_ = h.shm_reply_offset();
    reply_capacity_ = h.shm_reply_capacity();
  }
  return absl::OkStatus();
}

char* ExchangeSession::ReplyBuffer(int64_t size, std::optional<BufferPool::Buffer>* buf) {
  if (reply_capacity_ > 0 && size <= reply_capacity_) return shm_->data() + reply_offset_;
  buf->emplace(pool_->Acquire(size));
  return (*buf)->data();
}

void ExchangeSession::DescribePull(const std::vector<ShardStore::Pulled>& pulled,
                                   v1::FrameHeader* resp) const {
  for (const ShardStore::Pulled& p : pulled) {
    v1::TensorRef* r = resp->add_pull();
    r->set_version(p.version);
    r->set_bytes(bfloat16_ ? p.bytes / 2 : p.bytes);
  }
  resp->set_global_step(store_->global_step());
}

grpc::ByteBuffer ExchangeSession::PullReply(v1::FrameHeader resp,
                                            const std::vector<ShardStore::Pulled>& pulled,
                                            std::optional<BufferPool::Buffer> values,
                                            int64_t size) {
  DescribePull(pulled, &resp);
  if (bfloat16_) {
    // Narrowed where they were written, into the first half of the bytes.
    char* data = values.has_value() ? values->data() : shm_->data() + reply_offset_;
    FloatsToBfloat16(data, size / 4, data);
    size /= 2;
    if (values.has_value()) values->Shrink(static_cast<size_t>(size));
  }
  if (!values.has_value()) {
    resp.set_shm_reply(true);
    resp.set_shm_payload_bytes(size);
    return EncodeFrame(resp, {});
  }
  std::vector<grpc::Slice> payload;
  payload.push_back(std::move(*values).ToSlice());
  return EncodeFrame(resp, std::move(payload));
}

bool ExchangeSession::TryPull() {
  if (cancelled_.load(std::memory_order_acquire)) {
    respond_(ErrorFrame(pull_header_.request_id(), absl::CancelledError("the call was cancelled")));
    return true;
  }
  std::optional<BufferPool::Buffer> buf;
  char* into = ReplyBuffer(pull_size_, &buf);
  std::vector<ShardStore::Pulled> pulled;
  auto ready = store_->TryPull(pull_, into, &pulled, &waiting_for_);
  if (!ready.ok()) {
    respond_(ErrorFrame(pull_header_.request_id(), ready.status()));
    return true;
  }
  if (!*ready) return false;
  respond_(PullReply(std::move(pull_header_), pulled, std::move(buf), pull_size_));
  return true;
}

absl::Duration ExchangeSession::WaitTimeout() const {
  if (store_->initialized() && store_->job().sync_wait > absl::ZeroDuration()) {
    return store_->job().sync_wait;
  }
  return limits_.wait_timeout;
}

void ExchangeSession::Expire() {
  // A last attempt: a push that completes no round wakes no one, so what
  // the pull was last seen waiting for may be stale (and it may be ready
  // by now).
  if (TryPull()) return;
  respond_(
      ErrorFrame(pull_header_.request_id(),
                 absl::DeadlineExceededError(absl::StrCat(
                     "pull waited ", absl::FormatDuration(WaitTimeout()), ": ", waiting_for_))));
}

}  // namespace pstrain::ps
