#include "ps_server/ps_service.h"

#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/reshard.h"
#include "common/checkpoint_layout.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/process_stats.h"
#include "common/status_macros.h"
#include "ps_server/exchange_session.h"

namespace pstrain::ps {
namespace {

// The longest a chief may hold a PS's pushes: a chief that dies holding them
// stalls training no longer than this.
constexpr int32_t kMaxHoldLeaseMs = 60'000;

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

absl::StatusOr<SliceDef> SliceFromProto(const v1::SliceSpec& spec, int ps) {
  if (spec.variable().empty()) {
    return absl::InvalidArgumentError("slice with an empty variable name");
  }
  if (spec.shape_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("slice of ", spec.variable(), " has no shape"));
  }
  VariableDef var{spec.variable(), {spec.shape().begin(), spec.shape().end()}};
  for (int64_t d : var.shape) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice of ", spec.variable(), " has a dimension of ", d));
    }
  }
  if (spec.row_end() > var.rows() || spec.slice_index() < 0 ||
      spec.slice_index() >= spec.num_slices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slice ", spec.slice_index(), " of ", spec.num_slices(), " of ", spec.variable(),
        " with rows [", spec.row_begin(), ", ", spec.row_end(), ") does not fit its shape"));
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

// The transport of one Exchange stream: reads frames, hands each to its
// ExchangeSession (the frame logic), and writes the answers in order. The
// next read starts once the current frame's answer is queued, so a parked
// pull holds back only its own stream. Deletes itself in OnDone, which gRPC
// calls only after Finish, and Finish waits until no pull is parked (no
// read is outstanding while one is).
class ExchangeReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Pushes held by a checkpoint wait on `held_pushes`.
  ExchangeReactor(ShardStore* store, std::shared_ptr<BufferPool> pool, const ExchangeLimits& limits,
                  CallGuard::Admission admission, SerialWorker* held_pushes)
      : admission_(std::move(admission)),
        session_(
            store, std::move(pool), limits,
            [this](grpc::ByteBuffer answer) { Respond(std::move(answer)); },
            [held_pushes](std::function<void()> task) { held_pushes->Run(std::move(task)); }) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    // Taken out of in_ first: the answer may start the next read into it.
    grpc::ByteBuffer received;
    received.Swap(&in_);
    session_.Handle(received);
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

  void OnCancel() override { session_.Cancel(); }

  void OnDone() override { delete this; }

 private:
  // Queues the answer to the current frame and reads the next one, unless
  // answers are piling up unsent: then reading waits for writes to drain,
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

  // Bytes of answers queued behind the one being written at which reading
  // pauses: one large pull's worth (small push acknowledgements never stop
  // a pipelining client).
  static constexpr size_t kMaxQueuedBytes = 4 << 20;

  // Holds this stream's place among the calls in flight until OnDone.
  const CallGuard::Admission admission_;
  grpc::ByteBuffer in_;
  ExchangeSession session_;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Ends a stream that was not admitted, with the reason.
class RefusedExchange final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedExchange(const absl::Status& why) { Finish(ToGrpcStatus(why)); }
  void OnDone() override { delete this; }
};

}  // namespace

PsServiceImpl::PsServiceImpl(ShardStore* store, OnShutdown on_shutdown, PsServiceOptions options)
    : store_(store),
      on_shutdown_(std::move(on_shutdown)),
      options_(options),
      // Idle response buffers kept for reuse: a few frames' worth.
      pool_(BufferPool::Create(16 << 20)),
      guard_(options.security, options.calls),
      failing_restore_reads_(options.test_failing_restore_reads) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsServiceImpl::Exchange(
    grpc::CallbackServerContext* ctx) {
  auto admitted = guard_.Admit(*ctx, "Exchange");
  if (!admitted.ok()) return new RefusedExchange(admitted.status());
  return new ExchangeReactor(store_, pool_, Limits(), *std::move(admitted), &held_pushes_);
}

ExchangeLimits PsServiceImpl::Limits() const {
  ExchangeLimits limits;
  limits.wait_timeout = options_.wait_timeout;
  limits.max_tensors = options_.max_tensors_per_request;
  limits.max_ids = options_.max_ids_per_request;
  limits.shared_memory = options_.shared_memory;
  limits.max_shared_bytes = options_.max_shared_region_bytes;
  return limits;
}

PsServiceImpl::~PsServiceImpl() = default;

absl::StatusOr<int> PsServiceImpl::ServeFramesOverTcp(const std::string& host,
                                                      int64_t max_frame_bytes) {
  FrameServerOptions options;
  options.host = host;
  options.limits = Limits();
  options.max_frame_bytes = max_frame_bytes;
  auto started = FrameServer::Start(store_, pool_, &guard_, std::move(options));
  if (!started.ok()) return started.status();
  frames_ = *std::move(started);
  frame_port_.store(frames_->port(), std::memory_order_release);
  return frames_->port();
}

grpc::ServerUnaryReactor* PsServiceImpl::CreateVariables(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateVariablesRequest* req,
                                                         v1::CreateVariablesResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "CreateVariables");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->ps_index() != store_->ps_index() || req->num_ps() != store_->num_ps()) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
                               "CreateVariables meant for ps:", req->ps_index(), " of ",
                               req->num_ps(), " reached ps:", store_->ps_index(), " of ",
                               store_->num_ps(), ": the callers' TF_CONFIG disagree")));
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
  job.optimizer.l1 = o.l1();
  job.optimizer.l2 = o.l2();
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
    return absl::InvalidArgumentError(
        absl::StrCat("a checkpoint needs a directory, a step >= 0 and a PS count >= 1, got \"",
                     ref.dir(), "\", ", ref.step(), " and ", ref.num_ps()));
  }
  const absl::Time start = absl::Now();
  if (failing_restore_reads_.load(std::memory_order_relaxed) > 0 &&
      failing_restore_reads_.fetch_sub(1, std::memory_order_relaxed) > 0) {
    return absl::InternalError(absl::StrCat("reading ", CheckpointDir(ref.dir(), ref.step()),
                                            ": an injected read error (test)"));
  }
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
      ref.num_ps() == store_->num_ps()
          ? ""
          : absl::StrCat(" (written by ", ref.num_ps(), " ps, re-sliced)"),
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

grpc::ServerUnaryReactor* PsServiceImpl::HoldPushes(grpc::CallbackServerContext* ctx,
                                                    const v1::HoldPushesRequest* req,
                                                    v1::HoldPushesResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "HoldPushes");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->lease_ms() < 0 || req->lease_ms() > kMaxHoldLeaseMs) {
    return FinishWith(ctx, absl::InvalidArgumentError(
                               absl::StrCat("HoldPushes needs a lease of 0 (release) to ",
                                            kMaxHoldLeaseMs, " ms, got ", req->lease_ms())));
  }
  if (req->lease_ms() == 0) {
    store_->push_hold().Release();
    resp->set_global_step(store_->global_step());
    return FinishWith(ctx, absl::OkStatus());
  }
  // Waiting for the pushes being applied to finish must not take a gRPC
  // thread: it runs on the checkpoint thread, as saves do.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto admission = std::make_shared<CallGuard::Admission>(*std::move(admitted));
  checkpoint_writer_.Run([this, req, resp, reactor, admission] {
    const absl::Status held = store_->push_hold().Hold(absl::Milliseconds(req->lease_ms()));
    if (held.ok()) resp->set_global_step(store_->global_step());
    reactor->Finish(ToGrpcStatus(held));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                                        const v1::SaveCheckpointRequest* req,
                                                        v1::SaveCheckpointResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "SaveCheckpoint");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  if (req->dir().empty() || req->step() < 0) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
                               "SaveCheckpoint needs a directory and a step >= 0, got \"",
                               req->dir(), "\" and ", req->step())));
  }
  // The snapshot and the write run on the checkpoint thread; this gRPC
  // thread returns at once, and the call is answered from there.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto admission = std::make_shared<CallGuard::Admission>(*std::move(admitted));
  checkpoint_writer_.Run([this, req, resp, reactor, admission] {
    const absl::Time start = absl::Now();
    PushHold& hold = store_->push_hold();
    std::function<void()> after_cut;
    if (req->release_hold()) after_cut = [&hold] { hold.Release(); };
    auto snapshot = store_->Snapshot(req->step(), after_cut);
    if (req->release_hold()) hold.Release();  // also when nothing was cut
    if (!snapshot.ok()) {
      reactor->Finish(ToGrpcStatus(snapshot.status()));
      return;
    }
    const int tensors = static_cast<int>(snapshot->tensors.size());
    const std::string path =
        ShardPath(req->dir(), req->step(), store_->ps_index(), store_->num_ps());
    auto written = ckpt::WriteShard(path, *std::move(snapshot), options_.test_checkpoint_delay);
    if (!written.ok()) {
      reactor->Finish(ToGrpcStatus(written.status()));
      return;
    }
    resp->set_path(path);
    resp->set_bytes(written->bytes);
    resp->set_crc32c(written->crc);
    resp->set_tensors(tensors);
    resp->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    shards_written_.fetch_add(1, std::memory_order_release);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::Health(grpc::CallbackServerContext* ctx,
                                                const v1::HealthRequest* req,
                                                v1::HealthResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Health");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  last_health_micros_.store(absl::ToUnixMicros(absl::Now()), std::memory_order_relaxed);
  resp->set_initialized(store_->ready());
  resp->set_generation(store_->generation());
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  resp->set_restored_step(store_->restored_step());
  resp->set_frame_port(frame_port_.load(std::memory_order_acquire));
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
    out->mutable_replica_pushes()->Add(s.replica_pushes.begin(), s.replica_pushes.end());
  }
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  resp->set_resident_bytes(ResidentBytes().value_or(0));
  resp->set_refused_unauthenticated(guard_.unauthenticated());
  resp->set_refused_over_limit(guard_.over_limit());
  resp->set_calls_in_flight(guard_.in_flight());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Shutdown(grpc::CallbackServerContext* ctx,
                                                  const v1::ShutdownRequest* req,
                                                  v1::ShutdownResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Shutdown");
  if (!admitted.ok()) return FinishWith(ctx, admitted.status());
  grpc::ServerUnaryReactor* reactor = FinishWith(ctx, absl::OkStatus());
  on_shutdown_(req->reason(), req->exit_code());
  return reactor;
}

}  // namespace pstrain::ps
