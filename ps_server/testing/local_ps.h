// Real PS servers in the test's own process: for each, a ShardStore, the
// gRPC service and a server bound to 127.0.0.1 on a free port, and, unless
// the options configure TLS, its frame port (ps_server/frame_server.h). Tests talk to
// them over loopback with the real client, as a worker would.
#ifndef PSTRAIN_PS_SERVER_TESTING_LOCAL_PS_H_
#define PSTRAIN_PS_SERVER_TESTING_LOCAL_PS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/grpc_server.h"
#include "cluster/tf_config.h"
#include "ps_server/ps_service.h"
#include "store/shard_store.h"

namespace pstrain::ps::testing {

class LocalPs {
 public:
  // `num_ps` servers; a Shutdown RPC to one records its reason. Their
  // stores' waits and leases run on `clock`.
  static absl::StatusOr<std::unique_ptr<LocalPs>> Start(
      int num_ps, PsServiceOptions options = PsServiceOptions(), int max_message_bytes = 512 << 20,
      const Clock* clock = Clock::Real());
  ~LocalPs();

  const std::vector<HostPort>& addresses() const { return addresses_; }
  ShardStore& store(int i) { return *stores_[i]; }
  GrpcServer& server(int i) { return *servers_[i]; }
  // 0 when the server takes frames only in gRPC.
  int frame_port(int i) const { return frame_ports_[i]; }

 private:
  LocalPs() = default;
  std::vector<std::unique_ptr<ShardStore>> stores_;
  std::vector<std::unique_ptr<PsServiceImpl>> services_;
  std::vector<std::unique_ptr<GrpcServer>> servers_;
  std::vector<HostPort> addresses_;
  std::vector<int> frame_ports_;
};

}  // namespace pstrain::ps::testing

#endif  // PSTRAIN_PS_SERVER_TESTING_LOCAL_PS_H_
