#include "ps_server/ps_service.h"

#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/process_stats.h"
#include "common/checkpoint_layout.h"
#include "common/status_macros.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/reshard.h"

namespace pstrain::ps {
namespace {

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx,
                                     const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

absl::StatusOr<SliceDef> SliceFromProto(const v1::SliceSpec& spec, int ps) {
  if (spec.variable().empty()) {
    return absl::InvalidArgumentError("slice with an empty variable name");
  }
  if (spec.shape_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice of ", spec.variable(), " has no shape"));
  }
  VariableDef var{spec.variable(), {spec.shape().begin(), spec.shape().end()}};
  for (int64_t d : var.shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice of ", spec.variable(), " has a dimension of ", d));
    }
  }
  if (spec.row_end() > var.rows() || spec.slice_index() < 0 ||
      spec.slice_index() >= spec.num_slices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slice ", spec.slice_index(), " of ", spec.num_slices(), " of ",
        spec.variable(), " with rows [", spec.row_begin(), ", ",
        spec.row_end(), ") does not fit its shape"));
  }
  SliceDef def;
  def.variable = spec.variable();
  def.slice_index = spec.slice_index();
  def.num_slices = spec.num_slices();
  def.row_begin = spec.row_begin();
  def.row_end = spec.row_end();
  def.row_elements = var.row_elements();
  def.ps = ps;
  return def;
}

// One Exchange stream. Frames are handled one at a time, in order: the next
// read starts once the current frame's response is queued, so a parked pull
// holds back only its own stream. Deletes itself in OnDone, which gRPC calls
// only after Finish, and Finish waits until no pull is parked.
class ExchangeReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ExchangeReactor(ShardStore* store, std::shared_ptr<BufferPool> pool,
                  const PsServiceOptions& options, CallGuard::Admission admission)
      : store_(store),
        pool_(std::move(pool)),
        wait_timeout_(options.wait_timeout),
        max_tensors_(options.max_tensors_per_request),
        max_ids_(options.max_ids_per_request),
        shared_memory_(options.shared_memory),
        max_shared_bytes_(options.max_shared_region_bytes),
        admission_(std::move(admission)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    Handle();
  }

  void OnWriteDone(bool ok) override {
    bool resume_reading = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      // Lets go of the payload now: an answer sent from a tensor's own
      // values holds it from being written in place until then.
      out_.Clear();
      if (!ok) {
        // The call is gone; drop what is queued.
        broken_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
      WriteNextLocked();
      if (read_paused_ && queued_bytes_ < kMaxQueuedBytes) {
        read_paused_ = false;
        resume_reading = true;
      }
      MaybeFinishLocked();
    }
    if (resume_reading) StartRead(&in_);
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    store_->wait_list().Notify();  // lets a parked pull give up now
  }

  void OnDone() override { delete this; }

 private:
  void Handle() {
    absl::Status parsed = request_.Parse(in_);
    in_.Clear();
    const v1::FrameHeader& h = request_.header();
    if (!parsed.ok()) return Respond(ErrorFrame(h.request_id(), parsed));
    if (h.has_shm_attach()) return Respond(Attach(h));
    absl::Status within = CheckLimits(h);
    if (!within.ok()) return Respond(ErrorFrame(h.request_id(), within));
    absl::Status shared = UseSharedRegion(h);
    if (!shared.ok()) return Respond(ErrorFrame(h.request_id(), shared));
    v1::FrameHeader resp;
    resp.set_request_id(h.request_id());
    pull_ = ShardStore::PullBatch();
    pull_.replica = h.replica();
    pull_.generation = h.generation();
    pull_.min_step = h.min_step();
    pull_.stop_step = h.stop_step();
    pull_.tensors = ShardStore::RefsOf(h.pull());
    if (h.push_size() > 0) {
      ShardStore::PushBatch push;
      push.replica = h.replica();
      push.generation = h.generation();
      push.consistency = h.consistency();
      push.stop_step = h.stop_step();
      push.tensors = ShardStore::RefsOf(h.push());
      // A push-then-pull of the same async tensors: read the new values
      // back while applying, and answer at once. When the gradient came in
      // the frame, no reply buffer is filled (4 MiB less to touch per 4 MiB
      // tensor): the answer is sent from the stored values themselves (SGD)
      // or from the new values written where gRPC received the gradient
      // (PushBatch::read_back_in_frame); in shared memory, they go to the
      // reply space.
      std::optional<BufferPool::Buffer> back;
      std::vector<grpc::Slice> back_slices;
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
            push.read_back_in_frame = &request_;
            push.read_back_slices = &back_slices;
          } else {
            push.read_back = ReplyBuffer(back_size, &back);
          }
          push.read_back_versions = &back_info;
        }
      }
      auto applied = store_->Push(push, request_);
      if (!applied.ok()) return Respond(ErrorFrame(h.request_id(), applied.status()));
      for (bool a : *applied) resp.add_applied(a);
      if (in_frame) {
        DescribePull(back_info, &resp);
        return Respond(EncodeFrame(resp, std::move(back_slices)));
      }
      if (back_size >= 0) {
        return Respond(PullReply(std::move(resp), back_info, std::move(back), back_size));
      }
    } else if (request_.payload_size() != 0) {
      return Respond(ErrorFrame(h.request_id(), absl::InvalidArgumentError(absl::StrCat(
          "frame carries ", request_.payload_size(), " payload bytes but pushes nothing"))));
    }
    if (pull_.tensors.empty()) {
      resp.set_global_step(store_->global_step());
      return Respond(EncodeFrame(resp, {}));
    }
    auto size = store_->PullSize(pull_);
    if (!size.ok()) return Respond(ErrorFrame(h.request_id(), size.status()));
    pull_size_ = *size;
    pull_header_ = std::move(resp);
    store_->wait_list().RunWhenReady([this] { return TryPull(); },
                                     absl::Now() + WaitTimeout(), [this] { Expire(); });
  }

  absl::Status CheckLimits(const v1::FrameHeader& h) const {
    const int64_t tensors = int64_t{h.push_size()} + h.pull_size();
    if (tensors > max_tensors_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the frame names ", tensors, " tensors; the limit is ", max_tensors_,
          " per request (--max_tensors_per_request)"));
    }
    int64_t ids = 0;
    for (const v1::TensorRef& r : h.push()) ids += r.ids_size();
    for (const v1::TensorRef& r : h.pull()) ids += r.ids_size();
    if (ids > max_ids_) {
      return absl::ResourceExhaustedError(absl::StrCat("the frame names ", ids,
                                                       " table ids; the limit is ", max_ids_,
                                                       " per request (--max_ids_per_request)"));
    }
    return absl::OkStatus();
  }

  // Maps the region a frame offers (the stream's first) and says whether it
  // could; a region that cannot be used is no error: the stream carries its
  // payloads inline.
  grpc::ByteBuffer Attach(const v1::FrameHeader& h) {
    v1::FrameHeader resp;
    resp.set_request_id(h.request_id());
    const v1::SharedRegionRef& ref = h.shm_attach();
    if (!shared_memory_) {
      resp.set_message("shared memory is off on this PS (--shared_memory=false)");
    } else if (shm_ != nullptr) {
      resp.set_message(absl::StrCat("the stream already has shared memory ", shm_->name()));
    } else if (ref.bytes() > max_shared_bytes_) {
      resp.set_message(absl::StrCat("shared memory of ", ref.bytes(),
                                    " bytes is over this PS's limit of ", max_shared_bytes_));
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

  // Reads the frame's shared-memory fields: its payload from the region,
  // and where its pull's values may go.
  absl::Status UseSharedRegion(const v1::FrameHeader& h) {
    reply_capacity_ = 0;
    const bool payload_shared = h.shm_payload_bytes() != 0 || h.shm_payload_offset() != 0;
    if (!payload_shared && h.shm_reply_capacity() == 0) return absl::OkStatus();
    if (shm_ == nullptr) {
      return absl::FailedPreconditionError(
          "the frame names shared memory, but the stream has none attached");
    }
    if (payload_shared) {
      if (request_.payload_size() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the frame carries ", request_.payload_size(),
            " payload bytes and names a payload in shared memory too"));
      }
      if (!shm_->Contains(h.shm_payload_offset(), h.shm_payload_bytes())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the frame's payload of ", h.shm_payload_bytes(), " bytes at offset ",
            h.shm_payload_offset(), " lies outside the shared memory of ", shm_->size(),
            " bytes"));
      }
      request_.SetExternalPayload(shm_->data() + h.shm_payload_offset(), h.shm_payload_bytes());
    }
    if (h.shm_reply_capacity() != 0) {
      if (!shm_->Contains(h.shm_reply_offset(), h.shm_reply_capacity())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the frame's reply space of ", h.shm_reply_capacity(), " bytes at offset ",
            h.shm_reply_offset(), " lies outside the shared memory of ", shm_->size(),
            " bytes"));
      }
      reply_offset_ = h.shm_reply_offset();
      reply_capacity_ = h.shm_reply_capacity();
    }
    return absl::OkStatus();
  }

  // Where `size` bytes of pulled values are written: the frame's reply space
  // in shared memory when they fit there, else a pooled buffer put in `buf`.
  char* ReplyBuffer(int64_t size, std::optional<BufferPool::Buffer>* buf) {
    if (reply_capacity_ > 0 && size <= reply_capacity_) return shm_->data() + reply_offset_;
    buf->emplace(pool_->Acquire(size));
    return (*buf)->data();
  }

  // Adds to `resp`, the answer to a frame that pulled, each tensor's version
  // and bytes and the global step.
  void DescribePull(const std::vector<ShardStore::Pulled>& pulled, v1::FrameHeader* resp) const {
    for (const ShardStore::Pulled& p : pulled) {
      v1::TensorRef* r = resp->add_pull();
      r->set_version(p.version);
      r->set_bytes(p.bytes);
    }
    resp->set_global_step(store_->global_step());
  }

  // The answer to a frame that pulled: `resp` described by DescribePull; the
  // `size` bytes of values are in `values`, or, without it, in the frame's
  // reply space in shared memory.
  grpc::ByteBuffer PullReply(v1::FrameHeader resp, const std::vector<ShardStore::Pulled>& pulled,
                             std::optional<BufferPool::Buffer> values, int64_t size) {
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

  // Serves the pull if it is ready (or failed); false to keep waiting.
  bool TryPull() {
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {
        Respond(ErrorFrame(pull_header_.request_id(),
                           absl::CancelledError("the call was cancelled")));
        return true;
      }
    }
    std::optional<BufferPool::Buffer> buf;
    char* into = ReplyBuffer(pull_size_, &buf);
    std::vector<ShardStore::Pulled> pulled;
    auto ready = store_->TryPull(pull_, into, &pulled, &waiting_for_);
    if (!ready.ok()) {
      Respond(ErrorFrame(pull_header_.request_id(), ready.status()));
      return true;
    }
    if (!*ready) return false;
    Respond(PullReply(std::move(pull_header_), pulled, std::move(buf), pull_size_));
    return true;
  }

  // The job's own bound on waiting for other replicas, else the service's.
  absl::Duration WaitTimeout() const {
    if (store_->initialized() && store_->job().sync_wait > absl::ZeroDuration()) {
      return store_->job().sync_wait;
    }
    return wait_timeout_;
  }

  void Expire() {
    Respond(ErrorFrame(pull_header_.request_id(),
                       absl::DeadlineExceededError(absl::StrCat(
                           "pull waited ", absl::FormatDuration(WaitTimeout()), ": ",
                           waiting_for_))));
  }

  static grpc::ByteBuffer ErrorFrame(uint64_t id, const absl::Status& s) {
    v1::FrameHeader h;
    h.set_request_id(id);
    h.set_code(static_cast<int>(s.code()));
    h.set_message(std::string(s.message()));
    return EncodeFrame(h, {});
  }

  // Queues the response to the current frame and reads the next one, unless
  // responses are piling up unsent: then reading waits for writes to drain,
  // so a client pipelining many large frames cannot make this PS buffer
  // them all (flow control holds them back in the client instead).
  void Respond(grpc::ByteBuffer frame) {
    {
      absl::MutexLock lock(&mu_);
      if (!broken_) {
        queued_bytes_ += frame.Length();
        queue_.push_back(std::move(frame));
      }
      WriteNextLocked();
      if (queued_bytes_ >= kMaxQueuedBytes) {
        read_paused_ = true;
        return;
      }
    }
    StartRead(&in_);
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queue_.empty()) return;
    writing_ = true;
    out_ = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= out_.Length();
    StartWrite(&out_);
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || writing_ || !queue_.empty()) return;
    finished_ = true;
    Finish(grpc::Status::OK);
  }

  // Bytes of responses queued behind the one being written at which reading
  // pauses: one large pull's worth (small push acknowledgements never stop
  // a pipelining client).
  static constexpr size_t kMaxQueuedBytes = 4 << 20;

  ShardStore* const store_;
  const std::shared_ptr<BufferPool> pool_;
  const absl::Duration wait_timeout_;
  const int64_t max_tensors_;
  const int64_t max_ids_;
  const bool shared_memory_;
  const int64_t max_shared_bytes_;
  // Holds this stream's place among the calls in flight until OnDone.
  const CallGuard::Admission admission_;
  grpc::ByteBuffer in_;
  // The frame being handled and its pull; touched by one thread at a time
  // (the read callback, then whoever runs the parked attempt).
  DecodedFrame request_;
  ShardStore::PullBatch pull_;
  int64_t pull_size_ = 0;
  v1::FrameHeader pull_header_;
  std::string waiting_for_;
  // The client's shared memory, once attached; the current frame's reply
  // space in it (capacity 0: none).
  std::unique_ptr<SharedRegion> shm_;
  int64_t reply_offset_ = 0;
  int64_t reply_capacity_ = 0;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Ends a stream that was not admitted, with the reason.
class RefusedExchange final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedExchange(const absl::Status& why) { Finish(ToGrpcStatus(why)); }
  void OnDone() override { delete this; }
};

}  // namespace

PsServiceImpl::PsServiceImpl(ShardStore* store,
                             std::function<void(const std::string& reason)> on_shutdown,
                             PsServiceOptions options)
    : store_(store),
      on_shutdown_(std::move(on_shutdown)),
      options_(options),
      // Idle response buffers kept for reuse: a few frames' worth.
      pool_(BufferPool::Create(16 << 20)),
      guard_(options.security, options.calls) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsServiceImpl::Exchange(
    grpc::CallbackServerContext* ctx) {
  auto admitted = guard_.Admit(*ctx, "Exchange");
  if (!admitted.ok()) return new RefusedExchange(admitted.status());
  return new ExchangeReactor(store_, pool_, options_, *std::move(admitted));
}

grpc::ServerUnaryReactor* PsServiceImpl::CreateVariables(
    grpc::CallbackServerContext* ctx, const v1::CreateVariablesRequest* req,
    v1::CreateVariablesResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "CreateVariables");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->ps_index() != store_->ps_index() || req->num_ps() != store_->num_ps()) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables meant for ps:", req->ps_index(), " of ", req->num_ps(),
        " reached ps:", store_->ps_index(), " of ", store_->num_ps(),
        ": the callers' TF_CONFIG disagree")));
  }
  if (req->initial_values_size() != 0 && req->initial_values_size() != req->slices_size()) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables has ", req->slices_size(), " slices but ",
        req->initial_values_size(), " initial values")));
  }
  std::vector<ShardStore::DenseInit> dense;
  for (int i = 0; i < req->slices_size(); ++i) {
    auto def = SliceFromProto(req->slices(i), store_->ps_index());
    if (!def.ok()) return FinishWith(ctx, def.status());
    ShardStore::DenseInit d;
    d.def = *std::move(def);
    d.consistency = req->slices(i).consistency();
    d.initializer = req->slices(i).initializer();
    if (req->initial_values_size() > 0) {
      d.has_value = true;
      d.value = req->initial_values(i);
    }
    dense.push_back(std::move(d));
  }
  std::vector<ShardStore::EmbeddingInit> tables;
  for (const v1::EmbeddingSpec& e : req->embeddings()) {
    tables.push_back({e.variable(), e.vocabulary(), e.dim(), e.consistency(), e.initializer()});
  }
  ShardStore::JobConfig job;
  const v1::OptimizerConfig& o = req->optimizer();
  job.optimizer.name = o.name();
  job.optimizer.learning_rate = o.learning_rate();
  job.optimizer.momentum = o.momentum();
  job.optimizer.nesterov = o.nesterov();
  job.optimizer.initial_accumulator = o.initial_accumulator();
  job.optimizer.beta1 = o.beta1();
  job.optimizer.beta2 = o.beta2();
  job.optimizer.epsilon = o.epsilon();
  auto mode = ParseConsistency(req->consistency().empty() ? "async" : req->consistency());
  if (!mode.ok()) return FinishWith(ctx, mode.status());
  job.consistency = *mode;
  job.num_replicas = req->num_replicas() == 0 ? 1 : req->num_replicas();
  job.replicas_to_aggregate = req->replicas_to_aggregate();
  job.seed = req->seed();
  job.generation = req->generation();
  job.sync_wait = absl::Milliseconds(req->sync_wait_ms());
  const bool restore = req->has_restore();
  const bool was_ready = store_->ready();
  auto created = store_->Initialize(job, dense, tables, /*await_restore=*/restore);
  if (!created.ok()) return FinishWith(ctx, created.status());
  resp->set_already_initialized(was_ready);
  // A store created by an earlier request whose restore failed still
  // awaits one: the chief retries with an older checkpoint.
  if (restore && !store_->ready()) {
    v1::RestoreResponse restored;
    return FinishWith(ctx, RestoreFrom(req->restore(), req->generation(), &restored));
  }
  return FinishWith(ctx, absl::OkStatus());
}

absl::Status PsServiceImpl::RestoreFrom(const v1::CheckpointRef& ref, int64_t generation,
                                        v1::RestoreResponse* resp) {
  if (!store_->initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps:", store_->ps_index(), " has no variables yet: create them before restoring"));
  }
  if (ref.dir().empty() || ref.step() < 0 || ref.num_ps() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a checkpoint needs a directory, a step >= 0 and a PS count >= 1, got \"", ref.dir(),
        "\", ", ref.step(), " and ", ref.num_ps()));
  }
  const absl::Time start = absl::Now();
  auto shard = ckpt::ReadCheckpointFor(ref.dir(), ref.step(), ref.num_ps(), store_->ps_index(),
                                 store_->num_ps(), store_->Layout());
  if (!shard.ok()) return shard.status();
  PSTRAIN_RETURN_IF_ERROR(store_->Restore(*shard, generation));
  int64_t bytes = 0;
  for (const v1::TensorCheckpoint& t : shard->tensors) bytes += t.data().size();
  resp->set_tensors(static_cast<int>(shard->tensors.size()));
  resp->set_bytes_read(bytes);
  resp->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  Log("restored ", shard->tensors.size(), " tensors at step ", ref.step(), " from ",
      CheckpointDir(ref.dir(), ref.step()),
      ref.num_ps() == store_->num_ps() ? ""
                                       : absl::StrCat(" (written by ", ref.num_ps(),
                                                      " ps, re-sliced)"),
      " in ", absl::FormatDuration(absl::Now() - start), "; serving generation ",
      store_->generation());
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsServiceImpl::Restore(grpc::CallbackServerContext* ctx,
                                                 const v1::RestoreRequest* req,
                                                 v1::RestoreResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Restore");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  return FinishWith(ctx, RestoreFrom(req->checkpoint(), req->generation(), resp));
}

grpc::ServerUnaryReactor* PsServiceImpl::SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                                        const v1::SaveCheckpointRequest* req,
                                                        v1::SaveCheckpointResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "SaveCheckpoint");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->dir().empty() || req->step() < 0) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
        "SaveCheckpoint needs a directory and a step >= 0, got \"", req->dir(), "\" and ",
        req->step())));
  }
  const absl::Time start = absl::Now();
  auto snapshot = store_->Snapshot(req->step());
  if (!snapshot.ok()) return FinishWith(ctx, snapshot.status());
  const int tensors = static_cast<int>(snapshot->tensors.size());
  const std::string path =
      ShardPath(req->dir(), req->step(), store_->ps_index(), store_->num_ps());
  auto written = ckpt::WriteShard(path, *std::move(snapshot), options_.test_checkpoint_delay);
  if (!written.ok()) return FinishWith(ctx, written.status());
  resp->set_path(path);
  resp->set_bytes(written->bytes);
  resp->set_crc32c(written->crc);
  resp->set_tensors(tensors);
  resp->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Health(grpc::CallbackServerContext* ctx,
                                                const v1::HealthRequest* req,
                                                v1::HealthResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Health");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  resp->set_initialized(store_->ready());
  resp->set_generation(store_->generation());
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  resp->set_restored_step(store_->restored_step());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Stats(grpc::CallbackServerContext* ctx,
                                               const v1::StatsRequest* req,
                                               v1::StatsResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Stats");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  for (const TensorStats& s : store_->Stats()) {
    v1::SliceStats* out = resp->add_slices();
    out->set_key(s.key);
    out->set_variable(s.variable);
    out->set_consistency(s.consistency);
    out->set_bytes(s.bytes);
    out->set_rows(s.rows);
    out->set_pushes(s.pushes);
    out->set_pulls(s.pulls);
    out->set_step(s.version);
    out->set_dropped_stale(s.dropped_stale);
    for (int64_t b : s.staleness) out->add_staleness_histogram(b);
  }
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  resp->set_resident_bytes(ResidentBytes().value_or(0));
  resp->set_refused_unauthenticated(guard_.unauthenticated());
  resp->set_refused_over_limit(guard_.over_limit());
  resp->set_calls_in_flight(guard_.in_flight());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Shutdown(
    grpc::CallbackServerContext* ctx, const v1::ShutdownRequest* req,
    v1::ShutdownResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Shutdown");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  grpc::ServerUnaryReactor* reactor = FinishWith(ctx, absl::OkStatus());
  on_shutdown_(req->reason());
  return reactor;
}

}  // namespace pstrain::ps
