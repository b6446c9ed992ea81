// Lifecycle of one gRPC server hosting a task's services.
//
//   Create() --binds and serves--> kServing --RequestStop()--> stop requested
//            --Shutdown(deadline)--> kStopped
//
// Create binds `address` (port 0 picks a free port; bound_port() reports it)
// and starts serving at once, as grpc::ServerBuilder does. RequestStop may be
// called from any thread, including a gRPC handler or a signal-watching
// thread; it only wakes WaitForStopRequest. Shutdown must be called from a
// thread that is not a gRPC handler: it stops accepting calls, waits up to
// `deadline` for calls in flight, then cancels the rest. The destructor shuts
// down with a zero deadline if Shutdown was not called.
// Thread-safe.
#ifndef PSTRAIN_TRANSPORT_GRPC_SERVER_H_
#define PSTRAIN_TRANSPORT_GRPC_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/security.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

struct GrpcServerOptions {
  // "host:port" to bind; "[::]:0" style wildcards are allowed. Required.
  std::string address;
  // 512 MiB: the largest single slice a PS sends or receives in one message.
  int max_message_bytes = 512 << 20;
  // TLS credentials when it configures TLS (null: plain). The services
  // check the token themselves (transport/call_guard.h).
  std::shared_ptr<const Security> security;
};

class GrpcServer {
 public:
  // `services` are not owned and must outlive the server. Unavailable when
  // the address cannot be bound (in use, not local), naming the address.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(
      const GrpcServerOptions& options,
      const std::vector<grpc::Service*>& services);
  ~GrpcServer();

  int bound_port() const { return bound_port_; }

  // Wakes WaitForStopRequest; `reason` is kept for the log.
  void RequestStop(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until RequestStop or `timeout`; returns the reason, or nullopt on
  // timeout.
  std::optional<std::string> WaitForStopRequest(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Idempotent. REQUIRES: not called from a gRPC handler.
  void Shutdown(absl::Duration deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GrpcServer(std::unique_ptr<grpc::Server> server, int port)
      : server_(std::move(server)), bound_port_(port) {}

  std::unique_ptr<grpc::Server> server_;
  const int bound_port_;
  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_TRANSPORT_GRPC_SERVER_H_
