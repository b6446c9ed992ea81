#include "transport/grpc_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(
    const GrpcServerOptions& options,
    const std::vector<grpc::Service*>& services) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("server address is empty");
  }
  grpc::ServerBuilder builder;
  int port = 0;
  const Security& security =
      options.security == nullptr ? *Security::None() : *options.security;
  builder.AddListeningPort(options.address, security.ServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Do not let a second process bind the same port: a stale task must fail
  // loudly rather than share traffic with the live one.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.address,
        ": the address is in use or not an address of this host"));
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), port));
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::RequestStop(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  stop_reason_ = reason;
}

std::optional<std::string> GrpcServer::WaitForStopRequest(
    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), timeout)) {
    return std::nullopt;
  }
  return stop_reason_;
}

void GrpcServer::Shutdown(absl::Duration deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(deadline));
  server_->Wait();
}

}  // namespace pstrain
