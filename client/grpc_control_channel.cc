#include "client/grpc_control_channel.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "transport/grpc_status.h"

namespace pstrain::client {
namespace {

// One unary call with `deadline`; errors name the PS and the method.
// Registered in `calls` while it runs: CancelCalls ends it.
template <typename Req, typename Resp, typename Method>
absl::StatusOr<Resp> Unary(InFlightCalls& calls, v1::PsService::Stub& stub, Method method,
                           const Req& req, absl::Time deadline, const std::string& ps_name,
                           absl::string_view name, bool wait_for_connection = false) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  ctx.set_wait_for_ready(wait_for_connection);
  if (!calls.Enter(&ctx)) {
    return absl::CancelledError(
        absl::StrCat(ps_name, ": ", name, ": not sent, the calls to the ps were cancelled"));
  }
  Resp resp;
  grpc::Status s = (stub.*method)(&ctx, req, &resp);
  calls.Leave(&ctx);
  if (!s.ok()) return FromGrpcStatus(s, ps_name, name);
  return resp;
}

}  // namespace

bool InFlightCalls::Enter(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  calls_.insert(ctx);
  return true;
}

void InFlightCalls::Leave(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  calls_.erase(ctx);
}

void InFlightCalls::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
}

void GrpcControlChannel::CancelCalls() { calls_.CancelAll(); }

grpc::ChannelArguments GrpcControlChannel::Arguments(int max_message_bytes, bool own_connection) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  // A PS that restarts is back within seconds; gRPC's default reconnect
  // backoff (up to 2 minutes) would notice it far later.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC takes this as the least time a connection attempt gets (its
  // "min connect timeout"): enough for a TLS handshake on a busy PS.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

GrpcControlChannel::GrpcControlChannel(const ControlChannelOptions& options)
    : addresses_(options.ps_addresses), security_(options.security) {
  const grpc::ChannelArguments args = Arguments(options.max_message_bytes, options.own_connection);
  const Security& security = security_ == nullptr ? *Security::None() : *security_;
  for (const HostPort& address : addresses_) {
    stubs_.push_back(v1::PsService::NewStub(security.CreateChannel(address.ToString(), args)));
  }
}

GrpcControlChannel::GrpcControlChannel(std::vector<std::shared_ptr<grpc::Channel>> channels,
                                       std::vector<HostPort> addresses,
                                       std::shared_ptr<const Security> security)
    : addresses_(std::move(addresses)), security_(std::move(security)) {
  for (const auto& channel : channels) stubs_.push_back(v1::PsService::NewStub(channel));
}

std::string GrpcControlChannel::PsName(int ps) const {
  return absl::StrCat("ps:", ps, " (", addresses_[ps].ToString(), ")");
}

absl::StatusOr<v1::HealthResponse> GrpcControlChannel::Health(int ps, absl::Time deadline,
                                                              bool wait_for_connection) {
  absl::StatusOr<v1::HealthResponse> resp = Unary<v1::HealthRequest, v1::HealthResponse>(
      calls_, *stubs_[ps], &v1::PsService::Stub::Health, v1::HealthRequest(), deadline, PsName(ps),
      "Health", wait_for_connection);
  if (resp.ok() && resp->ps_index() != ps) {
    return absl::FailedPreconditionError(absl::StrCat(
        PsName(ps), " says it is ps:", resp->ps_index(), ": the tasks' TF_CONFIG disagree"));
  }
  return resp;
}

absl::StatusOr<v1::CreateVariablesResponse> GrpcControlChannel::CreateVariables(
    int ps, const v1::CreateVariablesRequest& req, absl::Time deadline) {
  return Unary<v1::CreateVariablesRequest, v1::CreateVariablesResponse>(
      calls_, *stubs_[ps], &v1::PsService::Stub::CreateVariables, req, deadline, PsName(ps),
      "CreateVariables");
}

absl::StatusOr<v1::StatsResponse> GrpcControlChannel::Stats(int ps, absl::Time deadline) {
  return Unary<v1::StatsRequest, v1::StatsResponse>(calls_, *stubs_[ps],
                                                    &v1::PsService::Stub::Stats, v1::StatsRequest(),
                                                    deadline, PsName(ps), "Stats");
}

absl::StatusOr<v1::HoldPushesResponse> GrpcControlChannel::HoldPushes(
    int ps, const v1::HoldPushesRequest& req, absl::Time deadline) {
  return Unary<v1::HoldPushesRequest, v1::HoldPushesResponse>(calls_, *stubs_[ps],
                                                              &v1::PsService::Stub::HoldPushes, req,
                                                              deadline, PsName(ps), "HoldPushes");
}

absl::StatusOr<v1::SaveCheckpointResponse> GrpcControlChannel::SaveCheckpoint(
    int ps, const v1::SaveCheckpointRequest& req, absl::Time deadline) {
  return Unary<v1::SaveCheckpointRequest, v1::SaveCheckpointResponse>(
      calls_, *stubs_[ps], &v1::PsService::Stub::SaveCheckpoint, req, deadline, PsName(ps),
      "SaveCheckpoint");
}

absl::StatusOr<v1::RestoreResponse> GrpcControlChannel::Restore(int ps,
                                                                const v1::RestoreRequest& req,
                                                                absl::Time deadline) {
  return Unary<v1::RestoreRequest, v1::RestoreResponse>(
      calls_, *stubs_[ps], &v1::PsService::Stub::Restore, req, deadline, PsName(ps), "Restore");
}

absl::Status GrpcControlChannel::Shutdown(int ps, const v1::ShutdownRequest& req,
                                          absl::Time deadline) {
  return Unary<v1::ShutdownRequest, v1::ShutdownResponse>(calls_, *stubs_[ps],
                                                          &v1::PsService::Stub::Shutdown, req,
                                                          deadline, PsName(ps), "Shutdown")
      .status();
}

std::string GrpcControlChannel::Hint(const absl::Status& s) const {
  if (security_ == nullptr || !security_->tls() || s.code() != absl::StatusCode::kUnavailable ||
      absl::StrContains(s.message(), "Connection refused")) {
    return "";
  }
  // A server that refuses this task's certificate just closes the
  // connection; only its own log says why.
  return "; with mutual TLS this is also how a refused handshake looks: the "
         "PS's log "
         "says why";
}

}  // namespace pstrain::client
