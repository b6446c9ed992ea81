#include "ps_server/exchange_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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
                                 ExchangeLimits limits, Respond respond)
    : store_(store), pool_(std::move(pool)), limits_(limits), respond_(std::move(respond)) {}

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
  v1::FrameHeader resp;
  resp.set_request_id(h.request_id());
  pull_ = ShardStore::PullBatch();
  pull_.replica = h.replica();
  pull_.generation = h.generation();
  pull_.min_step = h.min_step();
  pull_.stop_step = h.stop_step();
  pull_.tensors = RefsOf(h.pull());
  if (h.push_size() > 0) {
    if (Push(h, resp)) return;
  } else if (request_.payload_size() != 0) {
    return respond_(ErrorFrame(h.request_id(), absl::InvalidArgumentError(absl::StrCat(
                                                   "frame carries ", request_.payload_size(),
                                                   " payload bytes but pushes nothing"))));
  }
  StartPull(std::move(resp));
}

bool ExchangeSession::Push(const v1::FrameHeader& h, v1::FrameHeader& resp) {
  ShardStore::PushBatch push;
  push.replica = h.replica();
  push.generation = h.generation();
  push.consistency = h.consistency();
  push.stop_step = h.stop_step();
  push.tensors = RefsOf(h.push());
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
  if (!pull_.tensors.empty() && store_->CanReadBack(push, pull_.tensors)) {
    auto size = store_->PullSize(pull_);
    if (size.ok()) {
      back_size = *size;
      in_frame = request_.payload_in_slices() && reply_capacity_ == 0 &&
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
  auto applied = store_->Push(push, request_.payload());
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

void ExchangeSession::StartPull(v1::FrameHeader resp) {
  if (pull_.tensors.empty()) {
    resp.set_global_step(store_->global_step());
    return respond_(EncodeFrame(resp, {}));
  }
  auto size = store_->PullSize(pull_);
  if (!size.ok()) return respond_(ErrorFrame(resp.request_id(), size.status()));
  pull_size_ = *size;
  pull_header_ = std::move(resp);
  store_->wait_list().RunWhenReady([this] { return TryPull(); }, absl::Now() + WaitTimeout(),
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
  for (const v1::TensorRef& r : h.push()) ids += r.ids_size();
  for (const v1::TensorRef& r : h.pull()) ids += r.ids_size();
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
    r->set_bytes(p.bytes);
  }
  resp->set_global_step(store_->global_step());
}

grpc::ByteBuffer ExchangeSession::PullReply(v1::FrameHeader resp,
                                            const std::vector<ShardStore::Pulled>& pulled,
                                            std::optional<BufferPool::Buffer> values,
                                            int64_t size) {
  DescribePull(pulled, &resp);
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
