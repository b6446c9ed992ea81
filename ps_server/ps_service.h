// gRPC adapter for the PS: each method validates the request, calls
// ShardStore, and finishes with the converted status. No training logic here.
// Thread-safe; handlers run on gRPC's callback threads and never block.
#ifndef PSTRAIN_PS_SERVER_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_PS_SERVICE_H_

#include <functional>

#include "proto/ps_service.grpc.pb.h"
#include "ps_server/shard_store.h"

namespace pstrain::ps {

class PsServiceImpl final : public v1::PsService::CallbackService {
 public:
  // `store` must outlive the service. `on_shutdown` runs (once per Shutdown
  // RPC, after the reply is queued) on a gRPC thread; it must not block.
  PsServiceImpl(ShardStore* store, int num_ps,
                std::function<void(const std::string& reason)> on_shutdown);

  grpc::ServerUnaryReactor* CreateVariables(
      grpc::CallbackServerContext* ctx, const v1::CreateVariablesRequest* req,
      v1::CreateVariablesResponse* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const v1::PullRequest* req,
                                 v1::PullResponse* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx,
                                 const v1::PushRequest* req,
                                 v1::PushResponse* resp) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx,
                                   const v1::HealthRequest* req,
                                   v1::HealthResponse* resp) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx,
                                  const v1::StatsRequest* req,
                                  v1::StatsResponse* resp) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const v1::ShutdownRequest* req,
                                     v1::ShutdownResponse* resp) override;

 private:
  ShardStore* const store_;
  const int num_ps_;
  const std::function<void(const std::string&)> on_shutdown_;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_PS_SERVICE_H_
