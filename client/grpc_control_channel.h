// The control calls of client/control_channel.h over gRPC: one unary call
// per request on the PS's stub, with the request's deadline. Shares the
// caller's channels (a PsClient's, say). Thread-safe.
#ifndef PSTRAIN_CLIENT_GRPC_CONTROL_CHANNEL_H_
#define PSTRAIN_CLIENT_GRPC_CONTROL_CHANNEL_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/control_channel.h"
#include "cluster/tf_config.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.grpc.pb.h"
#include "transport/security.h"

namespace pstrain::client {

struct ControlChannelOptions {
  std::vector<HostPort> ps_addresses;
  // TLS and token for every channel (transport/security.h); null: neither.
  std::shared_ptr<const Security> security;
  int max_message_bytes = 512 << 20;
  // A TCP connection of its own to each PS (gRPC otherwise shares one
  // among a process's channels of the same target and arguments).
  bool own_connection = false;
};

// The calls a channel has in flight, so that they can be cancelled.
class InFlightCalls {
 public:
  // Registers a call about to start; false (not to be started) once
  // CancelAll was called.
  bool Enter(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void Leave(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the calls in flight, and every later one before it starts.
  void CancelAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class GrpcControlChannel final : public PsControlChannel {
 public:
  // Channels to every PS of `options` (connected lazily, on first use).
  explicit GrpcControlChannel(const ControlChannelOptions& options);
  // Over the caller's channels, one per PS, named by `addresses`.
  GrpcControlChannel(std::vector<std::shared_ptr<grpc::Channel>> channels,
                     std::vector<HostPort> addresses, std::shared_ptr<const Security> security);

  // The channel arguments every PS channel of this project uses: message
  // limits, and reconnect backoffs short enough to notice a restarted PS
  // within a second or two.
  static grpc::ChannelArguments Arguments(int max_message_bytes, bool own_connection);

  int num_ps() const override { return static_cast<int>(stubs_.size()); }
  std::string PsName(int ps) const override;
  absl::StatusOr<v1::HealthResponse> Health(int ps, absl::Time deadline,
                                            bool wait_for_connection) override;
  absl::StatusOr<v1::CreateVariablesResponse> CreateVariables(int ps,
                                                              const v1::CreateVariablesRequest& req,
                                                              absl::Time deadline) override;
  absl::StatusOr<v1::StatsResponse> Stats(int ps, absl::Time deadline) override;
  absl::StatusOr<v1::HoldPushesResponse> HoldPushes(int ps, const v1::HoldPushesRequest& req,
                                                    absl::Time deadline) override;
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(int ps,
                                                            const v1::SaveCheckpointRequest& req,
                                                            absl::Time deadline) override;
  absl::StatusOr<v1::RestoreResponse> Restore(int ps, const v1::RestoreRequest& req,
                                              absl::Time deadline) override;
  absl::Status Shutdown(int ps, const v1::ShutdownRequest& req, absl::Time deadline) override;
  std::string Hint(const absl::Status& s) const override;
  void CancelCalls() override;

 private:
  InFlightCalls calls_;
  const std::vector<HostPort> addresses_;
  const std::shared_ptr<const Security> security_;
  std::vector<std::unique_ptr<v1::PsService::Stub>> stubs_;
};

}  // namespace pstrain::client

#endif  // PSTRAIN_CLIENT_GRPC_CONTROL_CHANNEL_H_
