#include "store/ps_control.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/reshard.h"
#include "cluster/checkpoint_layout.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace pstrain::ps {
namespace {

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

OptimizerSpec OptimizerFromProto(const v1::OptimizerConfig& o) {
  OptimizerSpec spec;
  spec.name = o.name();
  spec.learning_rate = o.learning_rate();
  spec.momentum = o.momentum();
  spec.nesterov = o.nesterov();
  spec.initial_accumulator = o.initial_accumulator();
  spec.beta1 = o.beta1();
  spec.beta2 = o.beta2();
  spec.epsilon = o.epsilon();
  spec.l1 = o.l1();
  spec.l2 = o.l2();
  spec.dense_table_updates = o.dense_table_updates();
  if (!o.schedule().empty()) spec.schedule = o.schedule();
  spec.decay_steps = o.decay_steps();
  spec.decay_rate = o.decay_rate();
  spec.staircase = o.staircase();
  spec.alpha = o.alpha();
  spec.boundaries.assign(o.boundaries().begin(), o.boundaries().end());
  spec.values.assign(o.values().begin(), o.values().end());
  return spec;
}

}  // namespace

absl::StatusOr<v1::CreateVariablesResponse> PsControl::CreateVariables(
    const v1::CreateVariablesRequest& req) {
  if (req.ps_index() != store_->ps_index() || req.num_ps() != store_->num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables meant for ps:", req.ps_index(), " of ", req.num_ps(), " reached ps:",
        store_->ps_index(), " of ", store_->num_ps(), ": the callers' TF_CONFIG disagree"));
  }
  if (req.initial_values_size() != 0 && req.initial_values_size() != req.slices_size()) {
    return absl::InvalidArgumentError(absl::StrCat("CreateVariables has ", req.slices_size(),
                                                   " slices but ", req.initial_values_size(),
                                                   " initial values"));
  }
  std::vector<ShardStore::DenseInit> dense;
  for (int i = 0; i < req.slices_size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(SliceDef def, SliceFromProto(req.slices(i), store_->ps_index()));
    ShardStore::DenseInit d;
    d.def = std::move(def);
    d.consistency = req.slices(i).consistency();
    d.initializer = req.slices(i).initializer();
    PSTRAIN_ASSIGN_OR_RETURN(d.update, ParseVariableUpdate(req.slices(i).update()));
    if (req.initial_values_size() > 0) {
      d.has_value = true;
      d.value = req.initial_values(i);
    }
    dense.push_back(std::move(d));
  }
  std::vector<ShardStore::EmbeddingInit> tables;
  for (const v1::EmbeddingSpec& e : req.embeddings()) {
    tables.push_back({e.variable(), e.vocabulary(), e.dim(), e.consistency(), e.initializer()});
  }
  ShardStore::JobConfig job;
  job.optimizer = OptimizerFromProto(req.optimizer());
  PSTRAIN_ASSIGN_OR_RETURN(job.consistency,
                           ParseConsistency(req.consistency().empty() ? "async" : req.consistency()));
  job.num_replicas = req.num_replicas() == 0 ? 1 : req.num_replicas();
  job.replicas_to_aggregate = req.replicas_to_aggregate();
  job.seed = req.seed();
  job.generation = req.generation();
  job.sync_wait = absl::Milliseconds(req.sync_wait_ms());
  const bool restore = req.has_restore();
  const bool was_ready = store_->ready();
  PSTRAIN_RETURN_IF_ERROR(
      store_->Initialize(job, dense, tables, /*await_restore=*/restore).status());
  v1::CreateVariablesResponse resp;
  resp.set_already_initialized(was_ready);
  // A store created by an earlier request whose restore failed still
  // awaits one: the chief retries with an older checkpoint.
  if (restore && !store_->ready()) {
    v1::RestoreResponse restored;
    PSTRAIN_RETURN_IF_ERROR(RestoreFrom(req.restore(), req.generation(), &restored));
  }
  return resp;
}

absl::StatusOr<v1::RestoreResponse> PsControl::Restore(const v1::RestoreRequest& req) {
  v1::RestoreResponse resp;
  PSTRAIN_RETURN_IF_ERROR(RestoreFrom(req.checkpoint(), req.generation(), &resp));
  return resp;
}

absl::Status PsControl::RestoreFrom(const v1::CheckpointRef& ref, int64_t generation,
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
  PSTRAIN_ASSIGN_OR_RETURN(
      ckpt::ShardContents shard,
      ckpt::ReadCheckpointFor(ref.dir(), ref.step(), ref.num_ps(), store_->ps_index(),
                              store_->num_ps(), store_->Layout(), options_.env));
  PSTRAIN_RETURN_IF_ERROR(store_->Restore(shard, generation));
  int64_t bytes = 0;
  for (const v1::TensorCheckpoint& t : shard.tensors) bytes += t.data().size();
  resp->set_tensors(static_cast<int>(shard.tensors.size()));
  resp->set_bytes_read(bytes);
  resp->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  Log("restored ", shard.tensors.size(), " tensors at step ", ref.step(), " from ",
      CheckpointDir(ref.dir(), ref.step()),
      ref.num_ps() == store_->num_ps()
          ? ""
          : absl::StrCat(" (written by ", ref.num_ps(), " ps, re-sliced)"),
      " in ", absl::FormatDuration(absl::Now() - start), "; serving generation ",
      store_->generation());
  return absl::OkStatus();
}

absl::StatusOr<v1::HoldPushesResponse> PsControl::HoldPushes(const v1::HoldPushesRequest& req) {
  if (req.lease_ms() < 0 || req.lease_ms() > kMaxHoldLeaseMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HoldPushes needs a lease of 0 (release) to ", kMaxHoldLeaseMs, " ms, got ",
        req.lease_ms()));
  }
  if (req.lease_ms() == 0) {
    store_->push_hold().Release();
  } else {
    PSTRAIN_RETURN_IF_ERROR(store_->push_hold().Hold(absl::Milliseconds(req.lease_ms())));
  }
  v1::HoldPushesResponse resp;
  resp.set_global_step(store_->global_step());
  return resp;
}

absl::StatusOr<v1::SaveCheckpointResponse> PsControl::SaveCheckpoint(
    const v1::SaveCheckpointRequest& req) {
  if (req.dir().empty() || req.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SaveCheckpoint needs a directory and a step >= 0, got \"", req.dir(),
                     "\" and ", req.step()));
  }
  const absl::Time start = absl::Now();
  PushHold& hold = store_->push_hold();
  std::function<void()> after_cut;
  if (req.release_hold()) after_cut = [&hold] { hold.Release(); };
  absl::StatusOr<ckpt::ShardContents> snapshot = store_->Snapshot(req.step(), after_cut);
  if (req.release_hold()) hold.Release();  // also when nothing was cut
  if (!snapshot.ok()) return snapshot.status();
  const int tensors = static_cast<int>(snapshot->tensors.size());
  const std::string path = ShardPath(req.dir(), req.step(), store_->ps_index(), store_->num_ps());
  PSTRAIN_ASSIGN_OR_RETURN(
      ckpt::ShardWritten written,
      ckpt::WriteShard(path, *std::move(snapshot), options_.env));
  v1::SaveCheckpointResponse resp;
  resp.set_path(path);
  resp.set_bytes(written.bytes);
  resp.set_crc32c(written.crc);
  resp.set_tensors(tensors);
  resp.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  shards_written_.fetch_add(1, std::memory_order_release);
  return resp;
}

v1::HealthResponse PsControl::Health() const {
  v1::HealthResponse resp;
  resp.set_initialized(store_->ready());
  resp.set_generation(store_->generation());
  resp.set_global_step(store_->global_step());
  resp.set_ps_index(store_->ps_index());
  resp.set_restored_step(store_->restored_step());
  return resp;
}

v1::StatsResponse PsControl::Stats() const {
  v1::StatsResponse resp;
  for (const TensorStats& s : store_->Stats()) {
    v1::SliceStats* out = resp.add_slices();
    out->set_key(s.key);
    out->set_variable(s.variable);
    out->set_consistency(s.consistency);
    out->set_bytes(s.bytes);
    out->set_rows(s.rows);
    out->set_pushes(s.pushes);
    out->set_pulls(s.pulls);
    out->set_step(s.version);
    out->set_dropped_stale(s.dropped_stale);
    out->set_repeated_pushes(s.repeated_pushes);
    for (int64_t b : s.staleness) out->add_staleness_histogram(b);
    out->mutable_replica_pushes()->Add(s.replica_pushes.begin(), s.replica_pushes.end());
  }
  resp.set_global_step(store_->global_step());
  resp.set_ps_index(store_->ps_index());
  return resp;
}

}  // namespace pstrain::ps
