#include "ps_server/ps_main.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/signals.h"
#include "job/chief_client.h"
#include "job/flag_table.h"
#include "job/job_flags.h"
#include "job/run_info.h"
#include "job/run_record.h"
#include "job/task_flags.h"
#include "ps_server/ps_service.h"
#include "store/shard_store.h"
#include "transport/frame_socket.h"
#include "transport/grpc_server.h"

namespace pstrain::ps {

int PsMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security) {
  // A PS that cannot serve, for good (its flags, an address not this
  // host's), tells the chief, which fails the job with its code rather
  // than waiting --ps_wait_s for it; then exits with that code.
  auto fail = [&](const absl::Status& why) {
    Log(why.message());
    const int code = RoleExitCode(why, FailureKind::kBadConfig);
    if (code < kExitRetryable) {
      if (std::optional<HostPort> chief = cfg.chief_duties_address()) {
        Log("telling the job's chief (", chief->ToString(), ") that ", cfg.task.ToString(),
            " cannot serve (trying for up to 20 s)");
        ReportFailureToChief(*chief, cfg.task, why, code, *security, absl::Seconds(20));
      }
    }
    return code;
  };
  auto bind = StringFlag(args, "bind", cfg.task_address()->ToString());
  auto message_mib = IntFlag(args, "max_message_mib");
  auto per_client = IntFlag(args, "max_calls_per_client");
  auto calls = IntFlag(args, "max_calls");
  auto tensors = IntFlag(args, "max_tensors_per_request");
  auto ids = IntFlag(args, "max_ids_per_request");
  auto rows = IntFlag(args, "max_table_rows");
  auto shared = BoolFlag(args, "shared_memory");
  auto tcp_frames = BoolFlag(args, "tcp_frames");
  // How long a PS with variables keeps serving after SIGTERM or SIGINT for
  // the chief's last checkpoint (a platform stopping a job signals every
  // task at once; the chief checkpoints on its signal).
  auto stop_grace = IntFlag(args, "stop_grace_secs");
  // Where the chief records the job's end (run.json): a PS started after
  // its job finished has nothing to serve.
  auto output_dir = OutputDirFromFlags(args, cfg.environment);
  absl::Status s;
  for (const absl::Status& each :
       {bind.status(), output_dir.status(), message_mib.status(),
        per_client.status(), calls.status(), tensors.status(), ids.status(), rows.status(),
        shared.status(), tcp_frames.status(), stop_grace.status()}) {
    if (s.ok()) s = each;
  }
  if (s.ok()) s = CheckTaskFlags(args, Role::kPs);
  if (!s.ok()) return fail(s);
  ShardStore store(cfg.task.index, static_cast<int>(cfg.cluster.ps.size()), *rows);
  GrpcServer* server_for_signal = nullptr;
  absl::Mutex server_mu;
  int exit_code ABSL_GUARDED_BY(server_mu) = kExitOk;
  std::unique_ptr<GrpcServer> server;
  PsServiceOptions options;
  options.security = security;
  options.calls.max_calls_per_client = static_cast<int>(*per_client);
  options.calls.max_calls = static_cast<int>(*calls);
  options.max_tensors_per_request = static_cast<int>(*tensors);
  options.max_ids_per_request = *ids;
  options.shared_memory = *shared;
  PsServiceImpl service(
      &store,
      [&](const std::string& reason, int code) {
        absl::MutexLock lock(&server_mu);
        if (server_for_signal != nullptr) {
          exit_code = code;
          server_for_signal->RequestStop(reason);
        }
      },
      options);
  // A signal stops the PS with 128 + its number, once the chief's last
  // checkpoint is written (or the grace passes; at once without variables).
  WatchStopSignals([&](int signo) {
    if (store.initialized() && *stop_grace > 0) {
      const int64_t before = service.shards_written();
      Log("signal ", signo, ": serving up to ", *stop_grace,
          "s more (--stop_grace_secs) for the chief's last checkpoint");
      const absl::Time deadline = absl::Now() + absl::Seconds(*stop_grace);
      // No heartbeat for 2 s: no chief is left to checkpoint.
      while (service.shards_written() == before && absl::Now() < deadline &&
             absl::Now() - service.last_health() < absl::Seconds(2)) {
        absl::SleepFor(absl::Milliseconds(50));
      }
      Log(service.shards_written() > before ? "the chief's checkpoint is written"
          : absl::Now() < deadline          ? "no chief heartbeat for 2s: not waiting for it"
                                            : "no checkpoint came");
    }
    absl::MutexLock lock(&server_mu);
    exit_code = 128 + signo;
    if (server_for_signal != nullptr) {
      server_for_signal->RequestStop(absl::StrCat("signal ", signo));
    }
  });
  GrpcServerOptions server_options;
  server_options.address = *bind;
  server_options.max_message_bytes = static_cast<int>(*message_mib << 20);
  server_options.security = security;
  auto created = GrpcServer::Create(server_options, {&service});
  if (!created.ok()) {
    // The address (taken, not this host's): the configuration's; a port
    // still held by the PS's last run is Unavailable, retryable.
    return fail(created.status());
  }
  server = *std::move(created);
  {
    absl::MutexLock lock(&server_mu);
    server_for_signal = server.get();
  }
  Log("serving on ", *bind, " (", cfg.cluster.ps.size(), " ps in the job) with ",
      security->Describe());
  // Frames over TCP as well (inside TLS when the job has it).
  if (*tcp_frames) {
    auto host = ParseHostPort(*bind, "--bind");
    absl::StatusOr<int> port =
        host.ok() ? service.ServeFramesOverTcp(host->host, *message_mib << 20) : host.status();
    if (port.ok()) {
      std::string tls;
      if (security->tls()) {
        // Who will seal the records: the kernel where it takes TLS.
        const std::string missing = security->kernel_tls() ? KernelTlsMissing() : "";
        tls = absl::StrCat(", inside TLS 1.3 with the job's certificates, records sealed ",
                           !security->kernel_tls() ? "by OpenSSL (--kernel_tls=false)"
                           : missing.empty()       ? "and opened by the kernel"
                                                   : absl::StrCat("by OpenSSL (", missing, ")"));
      }
      Log("Exchange frames also over TCP on port ", *port, tls);
    } else {
      Log("Exchange frames only in gRPC: ", port.status().message());
    }
  }
  // A PS without variables (started again by its orchestrator, say) looks
  // every second whether the chief recorded that this job ended well, and
  // if so exits 0: the chief that would stop it has gone.
  // Likewise, any PS whose job failed for good after it started (run.json
  // records it: the chief could not tell this PS) exits with the job's code.
  const Json cluster = ClusterOf(cfg);
  const absl::Time started = absl::Now();
  std::optional<std::string> reason;
  while (!reason.has_value()) {
    if (!store.initialized()) {
      if (std::optional<std::string> ended = EndedWell(*output_dir, args.raw_flags(), cluster)) {
        reason = absl::StrCat("the job finished at ", *ended, " (", RunRecordPath(*output_dir),
                              "): nothing to serve");
        break;
      }
    }
    if (std::optional<absl::Status> failed =
            EndedBadly(*output_dir, args.raw_flags(), cluster, started)) {
      reason = std::string(failed->message());
      {
        absl::MutexLock lock(&server_mu);
        exit_code = RoleExitCode(*failed, FailureKind::kPermanent);
      }
      // The chief records the failure and then tells every PS: one that
      // read the record first still answers the chief's Shutdown for a
      // moment, which would otherwise find it gone and wait its ps_wait
      // for it to come back.
      server->WaitForStopRequest(absl::Seconds(2));
      break;
    }
    reason = server->WaitForStopRequest(absl::Seconds(1));
  }
  Log("stopping: ", reason.value_or("?"), "; ", store.global_step(), " pushes applied");
  {
    absl::MutexLock lock(&server_mu);
    server_for_signal = nullptr;
  }
  service.StopServingFrames();
  server->Shutdown(absl::Seconds(5));
  // What the chief said the job came to (0 on a signal or a finished job).
  absl::MutexLock lock(&server_mu);
  return exit_code;
}

}  // namespace pstrain::ps
