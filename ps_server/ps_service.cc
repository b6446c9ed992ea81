#include "ps_server/ps_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

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

}  // namespace

PsServiceImpl::PsServiceImpl(
    ShardStore* store, int num_ps,
    std::function<void(const std::string& reason)> on_shutdown)
    : store_(store), num_ps_(num_ps), on_shutdown_(std::move(on_shutdown)) {}

grpc::ServerUnaryReactor* PsServiceImpl::CreateVariables(
    grpc::CallbackServerContext* ctx, const v1::CreateVariablesRequest* req,
    v1::CreateVariablesResponse* resp) {
  if (req->ps_index() != store_->ps_index() || req->num_ps() != num_ps_) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables meant for ps:", req->ps_index(), " of ", req->num_ps(),
        " reached ps:", store_->ps_index(), " of ", num_ps_,
        ": the callers' TF_CONFIG disagree")));
  }
  std::vector<SliceDef> slices;
  std::vector<absl::string_view> values;
  for (int i = 0; i < req->slices_size(); ++i) {
    auto def = SliceFromProto(req->slices(i), store_->ps_index());
    if (!def.ok()) return FinishWith(ctx, def.status());
    slices.push_back(*std::move(def));
  }
  for (const std::string& v : req->initial_values()) values.push_back(v);
  const v1::OptimizerConfig& o = req->optimizer();
  OptimizerSpec opt;
  opt.name = o.name();
  opt.learning_rate = o.learning_rate();
  opt.momentum = o.momentum();
  opt.nesterov = o.nesterov();
  opt.initial_accumulator = o.initial_accumulator();
  opt.beta1 = o.beta1();
  opt.beta2 = o.beta2();
  opt.epsilon = o.epsilon();
  auto created = store_->Initialize(slices, values, opt);
  if (created.ok()) resp->set_already_initialized(!*created);
  return FinishWith(ctx, created.status());
}

grpc::ServerUnaryReactor* PsServiceImpl::Pull(grpc::CallbackServerContext* ctx,
                                              const v1::PullRequest* req,
                                              v1::PullResponse* resp) {
  for (const std::string& key : req->keys()) {
    absl::Status s = store_->Pull(key, resp->add_values());
    if (!s.ok()) {
      resp->Clear();
      return FinishWith(ctx, s);
    }
  }
  resp->set_global_step(store_->global_step());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Push(grpc::CallbackServerContext* ctx,
                                              const v1::PushRequest* req,
                                              v1::PushResponse* resp) {
  if (req->keys_size() != req->gradients_size()) {
    return FinishWith(ctx, absl::InvalidArgumentError(absl::StrCat(
        "push has ", req->keys_size(), " keys but ", req->gradients_size(),
        " gradients")));
  }
  std::vector<ShardStore::Update> updates(req->keys_size());
  for (int i = 0; i < req->keys_size(); ++i) {
    updates[i] = {req->keys(i), req->gradients(i)};
  }
  auto step = store_->Push(updates);
  if (step.ok()) resp->set_global_step(*step);
  return FinishWith(ctx, step.status());
}

grpc::ServerUnaryReactor* PsServiceImpl::Health(grpc::CallbackServerContext* ctx,
                                                const v1::HealthRequest* req,
                                                v1::HealthResponse* resp) {
  resp->set_initialized(store_->initialized());
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Stats(grpc::CallbackServerContext* ctx,
                                               const v1::StatsRequest* req,
                                               v1::StatsResponse* resp) {
  for (const SliceStatsSnapshot& s : store_->Stats()) {
    v1::SliceStats* out = resp->add_slices();
    out->set_key(s.key);
    out->set_bytes(s.bytes);
    out->set_pushes(s.pushes);
    out->set_pulls(s.pulls);
  }
  resp->set_global_step(store_->global_step());
  resp->set_ps_index(store_->ps_index());
  return FinishWith(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsServiceImpl::Shutdown(
    grpc::CallbackServerContext* ctx, const v1::ShutdownRequest* req,
    v1::ShutdownResponse* resp) {
  grpc::ServerUnaryReactor* reactor = FinishWith(ctx, absl::OkStatus());
  on_shutdown_(req->reason());
  return reactor;
}

}  // namespace pstrain::ps
