// gRPC adapter for the PS: control RPCs (CreateVariables, Health, Stats,
// HoldPushes, SaveCheckpoint, Restore, Shutdown) are unary (HoldPushes and
// SaveCheckpoint do their work on a thread of their own and answer from
// there); the data path is the Exchange stream, whose
// frames are parsed and built on raw byte buffers (transport/wire_frame.h) so tensor bytes are never
// copied through protobuf. Each stream handles its frames in order: a frame's push is applied, then
// its pull is served, or parked in the store's WaitList until a sync step or ssp clock allows it,
// without holding a gRPC thread. A client on this host may offer shared memory as its stream's
// first frame (transport/shared_memory.h); frames then name payloads and reply space in it, checked
// against its bounds. No training logic here: ShardStore decides. Thread-safe.
#ifndef PSTRAIN_PS_SERVER_PS_SERVICE_H_
#define PSTRAIN_PS_SERVER_PS_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "transport/call_guard.h"
#include "base/env.h"
#include "transport/security.h"
#include "base/serial_worker.h"
#include "transport/shared_memory.h"
#include "transport/wire_frame.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps_server/frame_server.h"
#include "store/ps_control.h"
#include "store/shard_store.h"

namespace pstrain::ps {

struct PsServiceOptions {
  // How long a pull may wait for a sync step or an ssp clock before it is
  // answered DeadlineExceeded, naming the replicas it waited for.
  absl::Duration wait_timeout = absl::Seconds(120);
  // Where checkpoint shards are written and read (never null).
  Env* env = Env::Default();
  // Token checks (and nothing else: TLS is the server's credentials). Null:
  // no token.
  std::shared_ptr<const Security> security;
  // Calls in flight per client connection and in all.
  CallLimits calls;
  // Per Exchange frame: tensors named (push and pull together) and table
  // ids over all of them. Past either: ResourceExhausted naming the limit.
  int max_tensors_per_request = 65536;
  int64_t max_ids_per_request = int64_t{1} << 20;
  // Whether a client on this host may offer shared memory for its frames'
  // payloads (transport/shared_memory.h), and the largest region mapped.
  bool shared_memory = true;
  int64_t max_shared_region_bytes = int64_t{4} << 30;
};

// Every method on the callback API; Exchange on raw byte buffers.
using PsServiceBase = v1::PsService::WithCallbackMethod_CreateVariables<
    v1::PsService::WithRawCallbackMethod_Exchange<v1::PsService::WithCallbackMethod_Health<
        v1::PsService::WithCallbackMethod_Stats<v1::PsService::WithCallbackMethod_HoldPushes<
            v1::PsService::WithCallbackMethod_SaveCheckpoint<
                v1::PsService::WithCallbackMethod_Restore<
                    v1::PsService::WithCallbackMethod_Shutdown<v1::PsService::Service>>>>>>>>;

class PsServiceImpl final : public PsServiceBase {
 public:
  // `store` must outlive the service. `on_shutdown` runs (once per Shutdown
  // RPC, after the reply is queued) on a gRPC thread with the request's
  // reason and exit code; it must not block.
  using OnShutdown = std::function<void(const std::string& reason, int exit_code)>;
  PsServiceImpl(ShardStore* store, OnShutdown on_shutdown,
                PsServiceOptions options = PsServiceOptions());
  ~PsServiceImpl() override;

  // Also takes Exchange frames over TCP (ps_server/frame_server.h) on
  // `host` (the host of the gRPC address), a free port, which Health then
  // reports: inside TLS with the job's certificates when the service's
  // security has TLS, else plain. Unavailable naming the address when it
  // cannot listen. Call at most once, before clients need it.
  absl::StatusOr<int> ServeFramesOverTcp(const std::string& host, int64_t max_frame_bytes);
  // Closes every frame connection and stops listening: a PS told to stop
  // applies no more pushes over TCP while gRPC's calls drain. Call from the
  // thread that called ServeFramesOverTcp, as the PS stops.
  void StopServingFrames();

  grpc::ServerUnaryReactor* CreateVariables(grpc::CallbackServerContext* ctx,
                                            const v1::CreateVariablesRequest* req,
                                            v1::CreateVariablesResponse* resp) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Exchange(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const v1::HealthRequest* req,
                                   v1::HealthResponse* resp) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx, const v1::StatsRequest* req,
                                  v1::StatsResponse* resp) override;
  grpc::ServerUnaryReactor* HoldPushes(grpc::CallbackServerContext* ctx,
                                       const v1::HoldPushesRequest* req,
                                       v1::HoldPushesResponse* resp) override;
  grpc::ServerUnaryReactor* SaveCheckpoint(grpc::CallbackServerContext* ctx,
                                           const v1::SaveCheckpointRequest* req,
                                           v1::SaveCheckpointResponse* resp) override;
  // Shards this PS has written (SaveCheckpoint calls completed): a PS
  // asked to stop waits for the chief's last checkpoint by it.
  int64_t shards_written() const { return control_.shards_written(); }
  // When the last Health call came (the chief heartbeats every PS every
  // 500 ms while it runs); the Unix epoch before any.
  absl::Time last_health() const {
    return absl::FromUnixMicros(last_health_micros_.load(std::memory_order_relaxed));
  }
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* ctx, const v1::RestoreRequest* req,
                                    v1::RestoreResponse* resp) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const v1::ShutdownRequest* req,
                                     v1::ShutdownResponse* resp) override;

 private:
  ExchangeLimits Limits() const;

  ShardStore* const store_;
  const OnShutdown on_shutdown_;
  const PsServiceOptions options_;
  const std::shared_ptr<BufferPool> pool_;
  CallGuard guard_;
  std::unique_ptr<FrameServer> frames_;
  std::atomic<int> frame_port_{0};
  std::atomic<int64_t> last_health_micros_{0};  // of the last Health call
  // What each control call does to the store.
  PsControl control_;
  // Pushes of gRPC Exchange streams that meet a checkpoint's hold wait here
  // for its end, not on gRPC's threads (ExchangeSession). Joined after the
  // checkpoint writer, which ends holds.
  SerialWorker held_pushes_;
  // SaveCheckpoint's snapshot and write (an fsync on a slow disk) run here,
  // one at a time, not on gRPC's threads. Last: destroyed (and joined)
  // first.
  SerialWorker checkpoint_writer_;
};

}  // namespace pstrain::ps

#endif  // PSTRAIN_PS_SERVER_PS_SERVICE_H_
