#include "ps_server/testing/local_ps.h"

namespace pstrain::ps::testing {

absl::StatusOr<std::unique_ptr<LocalPs>> LocalPs::Start(int num_ps, PsServiceOptions options,
                                                        int max_message_bytes,
                                                        const Clock* clock) {
  std::unique_ptr<LocalPs> ps(new LocalPs);
  LocalPs* self = ps.get();
  for (int i = 0; i < num_ps; ++i) {
    ps->stores_.push_back(
        std::make_unique<ShardStore>(i, num_ps, ShardStore::kDefaultMaxTableRows, clock));
    ps->services_.push_back(std::make_unique<PsServiceImpl>(
        ps->stores_.back().get(),
        [self, i](const std::string& reason, int) { self->servers_[i]->RequestStop(reason); },
        options));
  }
  for (int i = 0; i < num_ps; ++i) {
    GrpcServerOptions server_options;
    server_options.address = "127.0.0.1:0";
    server_options.max_message_bytes = max_message_bytes;
    server_options.security = options.security;
    auto server = GrpcServer::Create(server_options, {ps->services_[i].get()});
    if (!server.ok()) return server.status();
    ps->addresses_.push_back({"127.0.0.1", (*server)->bound_port()});
    ps->servers_.push_back(*std::move(server));
    // Frames over TCP as well, as the ps role serves them (inside TLS
    // when the options have it).
    auto port = ps->services_[i]->ServeFramesOverTcp("127.0.0.1", max_message_bytes);
    if (!port.ok()) return port.status();
    ps->frame_ports_.push_back(*port);
  }
  return ps;
}

LocalPs::~LocalPs() {
  for (auto& s : servers_) s->Shutdown(absl::Seconds(2));
}

}  // namespace pstrain::ps::testing
