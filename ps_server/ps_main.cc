#include "ps_server/ps_main.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/grpc_server.h"
#include "common/logging.h"
#include "common/signals.h"
#include "ps_server/ps_service.h"
#include "ps_server/shard_store.h"

namespace pstrain::ps {

int PsMain(const TfConfig& cfg, CliArgs& args) {
  auto bind = args.GetString("bind", cfg.task_address()->ToString());
  // Test-only: see PsServiceOptions::test_checkpoint_delay.
  auto delay_ms = args.GetInt("test_checkpoint_delay_ms", 0);
  absl::Status s = bind.status();
  if (s.ok()) s = delay_ms.status();
  if (s.ok()) s = args.CheckAllUsed();
  if (!s.ok()) {
    Log(s.message());
    return ExitCodeFor(s);
  }
  ShardStore store(cfg.task.index, static_cast<int>(cfg.cluster.ps.size()));
  GrpcServer* server_for_signal = nullptr;
  absl::Mutex server_mu;
  WatchStopSignals([&](int signo) {
    absl::MutexLock lock(&server_mu);
    if (server_for_signal != nullptr) {
      server_for_signal->RequestStop(absl::StrCat("signal ", signo));
    }
  });
  std::unique_ptr<GrpcServer> server;
  PsServiceOptions options;
  options.test_checkpoint_delay = absl::Milliseconds(*delay_ms);
  PsServiceImpl service(&store,
                        [&](const std::string& reason) {
                          absl::MutexLock lock(&server_mu);
                          if (server_for_signal != nullptr) {
                            server_for_signal->RequestStop(reason);
                          }
                        },
                        options);
  auto created = GrpcServer::Create({*bind}, {&service});
  if (!created.ok()) {
    Log(created.status().message());
    return ExitCodeFor(created.status());
  }
  server = *std::move(created);
  {
    absl::MutexLock lock(&server_mu);
    server_for_signal = server.get();
  }
  Log("serving on ", *bind, " (", cfg.cluster.ps.size(), " ps in the job)");
  std::optional<std::string> reason =
      server->WaitForStopRequest(absl::InfiniteDuration());
  Log("stopping: ", reason.value_or("?"), "; ", store.global_step(),
      " pushes applied");
  {
    absl::MutexLock lock(&server_mu);
    server_for_signal = nullptr;
  }
  server->Shutdown(absl::Seconds(5));
  return kExitOk;
}

}  // namespace pstrain::ps
