// ps_bench: throughput, latency and memory of the PS data path, measured
// side by side with a plain gRPC echo of the same bytes.
//
//   bazel-bin/bench/ps_bench
//       [--scenario=all|push_pull|alternating|pipelined|memory|checkpoint]
//       [--ps=M] [--clients=N] [--bytes=B,...] [--seconds=S] [--inflight=K]
//       [--model_mib=MiB] [--repeat=R] [--shared_memory]
//       [--transport=tcp|tls|grpc|shm] [--certs=DIR]
//       [--wire_dtype=float32|bfloat16]
//
// Each client thread has its own TCP connection to each server, as a
// worker process would; each run prints the servers' and this process's
// minor page faults per call and the connections it held.
//
// Servers run as separate processes (this binary, re-executed with --serve),
// so their resident memory is their own. Clients are threads of this process.
//   push_pull  each call pushes a tensor of B bytes to every PS and pulls it
//              back in one round trip (PsClient::PushPullAll, SGD applied);
//              then the same bytes through the echo reference: a bidi stream
//              of raw ByteBuffers that the server writes back untouched, the
//              client sending one reused buffer and reading in place.
//              Each round runs the PS with its frames over TCP (the PS's
//              frame port: ps_server/frame_server.h) and in the gRPC
//              stream, then the echo; R rounds, medians reported.
//              With --shared_memory, each round also runs the PS with the
//              clients' tensor bytes through shared memory (client/
//              ps_stream.h), which a worker on the PS's host uses by
//              default.
//   alternating  1 PS and the echo, one client each, push-then-pull calls
//              of B bytes taking turns call by call, so both see the same
//              machine state (the separate runs of push_pull drift apart on
//              a shared, noisy machine); median call times and their ratio,
//              per round of S seconds, R rounds.
//   pipelined  K pushes in flight on one stream per client, one way; R
//              rounds, the client counts taking turns, medians reported.
//   memory     one PS holding a dense model of model_mib MiB with Adam's two
//              slots, trained for a few rounds; its resident memory against
//              the bytes of values plus slots.
//   checkpoint the Fashion-MNIST guide MLP and a model_mib MiB dense model,
//              both with Adam, saved by 2 PS (SaveCheckpoint) and restored
//              onto 2, 3 and 1 fresh PS (values checked equal); write and
//              restore times
// Scenarios other than push_pull run the PS's clients over --transport
// (default tcp; tls: the frame port inside TLS, with --certs=DIR, a
// directory deploy/make_certs.sh made: mutual TLS and the cluster token).
// push_pull runs tcp and grpc in each round, and tls too when --certs is
// given, side by side.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/grpc_control_channel.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/ps_stream.h"
#include "base/cli_args.h"
#include "transport/frame_tls.h"
#include "transport/grpc_server.h"
#include "transport/security.h"
#include "base/malloc_tuning.h"
#include "base/median.h"
#include "cluster/placement.h"
#include "base/process_stats.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "transport/wire_frame.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "ps_server/ps_service.h"
#include "store/shard_store.h"

namespace pstrain::bench {
namespace {

constexpr char kEchoMethod[] = "/pstrain.bench.Echo/Exchange";
constexpr int kMaxMessage = 512 << 20;

// Arguments of the bench's own channels (to the echo, raw PS streams):
// messages up to kMaxMessage both ways.
// Each channel with its own TCP connection, as the PS clients' (below).
grpc::ChannelArguments LargeMessageArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessage);
  args.SetMaxSendMessageSize(kMaxMessage);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

// ---- servers (child processes) ----

// Writes every frame it reads straight back: the same ByteBuffer, no copy.
class EchoReactor final : public grpc::ServerGenericBidiReactor {
 public:
  EchoReactor() { StartRead(&buf_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&buf_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&buf_);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer buf_;
};

class EchoService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new EchoReactor;
  }
};

// --certs=DIR: what deploy/make_certs.sh DIR made, for --transport=tls
// (mutual TLS and the cluster token, as a job configured with them); null
// without.
std::shared_ptr<const Security> g_security;
std::string g_certs_dir;

int Serve(const std::string& kind, int port, int ps_index, int num_ps) {
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::atomic<bool> stop{false};
  WatchStopSignals([&](int) { stop = true; });
  if (kind == "echo") {
    EchoService echo;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(kMaxMessage);
    builder.SetMaxSendMessageSize(kMaxMessage);
    builder.RegisterCallbackGenericService(&echo);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr) {
      std::fprintf(stderr, "ps_bench: echo server cannot bind %s\n", address.c_str());
      return 1;
    }
    while (!stop) absl::SleepFor(absl::Milliseconds(50));
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    return 0;
  }
  ps::ShardStore store(ps_index, num_ps);
  std::unique_ptr<GrpcServer> server;
  ps::PsServiceOptions service_options;
  service_options.security = g_security;
  ps::PsServiceImpl service(&store, [&](const std::string&, int) { stop = true; },
                            service_options);
  GrpcServerOptions options;
  options.address = address;
  options.security = g_security;
  auto created = GrpcServer::Create(options, {&service});
  if (!created.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", std::string(created.status().message()).c_str());
    return 1;
  }
  server = *std::move(created);
  auto tcp = service.ServeFramesOverTcp("127.0.0.1", options.max_message_bytes);
  if (!tcp.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", std::string(tcp.status().message()).c_str());
    return 1;
  }
  while (!stop) absl::SleepFor(absl::Milliseconds(50));
  server->Shutdown(absl::Seconds(1));
  return 0;
}

// ---- orchestration ----

struct Servers {
  std::vector<pid_t> pids;
  std::vector<HostPort> addresses;

  ~Servers() { StopChildren(pids, absl::Seconds(5)); }
  double CpuSeconds() const {
    double total = 0;
    for (pid_t pid : pids) total += pstrain::CpuSeconds(pid).value_or(0);
    return total;
  }
  int64_t MinorFaults() const {
    int64_t total = 0;
    for (pid_t pid : pids) total += pstrain::MinorFaults(pid).value_or(0);
    return total;
  }
  // The servers' frame ports (ps_server/frame_server.h), once asked.
  std::vector<int> frame_ports;

  // Every port the clients may hold connections to.
  std::vector<int> Ports() const {
    std::vector<int> ports = frame_ports;
    for (const HostPort& a : addresses) ports.push_back(a.port);
    return ports;
  }
  int64_t ResidentBytes() const {
    int64_t total = 0;
    for (pid_t pid : pids) total += pstrain::ResidentBytes(pid).value_or(0);
    return total;
  }
};

// The security of a run over `transport`: the --certs' for tls and
// grpc_tls (the Exchange stream in gRPC's TLS), else none.
std::shared_ptr<const Security> SecurityFor(const std::string& transport) {
  return transport == "tls" || transport == "grpc_tls" ? g_security : nullptr;
}

// `n` servers of `kind` ("ps" or "echo"); PS with `security` (mutual TLS
// and the token) when given.
absl::StatusOr<std::unique_ptr<Servers>> StartServers(
    const std::string& kind, int n, std::shared_ptr<const Security> security = nullptr) {
  auto servers = std::make_unique<Servers>();
  auto ports = PickFreePorts(n);
  if (!ports.ok()) return ports.status();
  for (int i = 0; i < n; ++i) {
    SpawnOptions spawn;
    spawn.argv = {"/proc/self/exe", absl::StrCat("--serve=", kind),
                  absl::StrCat("--port=", (*ports)[i]), absl::StrCat("--ps_index=", i),
                  absl::StrCat("--num_ps=", n)};
    if (security != nullptr) spawn.argv.push_back("--certs=" + g_certs_dir);
    auto pid = Spawn(spawn);
    if (!pid.ok()) return pid.status();
    servers->pids.push_back(*pid);
    servers->addresses.push_back({"127.0.0.1", (*ports)[i]});
  }
  // Retried every 100 ms as the job's clients do (client/grpc_control_channel.h):
  // with gRPC's default backoff, an attempt before the server listens costs
  // a second.
  const grpc::ChannelArguments args = client::GrpcControlChannel::Arguments(
      /*max_message_bytes=*/4 << 20, /*own_connection=*/true);
  for (const HostPort& a : servers->addresses) {
    auto channel = (security != nullptr ? *security : *Security::None())
                       .CreateChannel(a.ToString(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
      return absl::UnavailableError(
          absl::StrCat(kind, " server at ", a.ToString(), " did not come up"));
    }
  }
  return servers;
}

struct Result {
  int64_t calls = 0;
  double seconds = 0;
  int64_t bytes_per_call = 0;  // each way (one way for pipelined)
  std::vector<double> latency_ms;
  int64_t server_rss = 0;
  // CPU time per call, in ms, of the servers and of this (client) process.
  double server_cpu_ms = 0;
  double client_cpu_ms = 0;
  // Minor page faults per call of the servers and of this process.
  double server_faults = 0;
  double client_faults = 0;
  // TCP connections from this process to the servers during the run.
  int connections = 0;
  // Over TLS frames: whether every client's records were sealed and opened
  // by the kernel (kTLS) rather than by OpenSSL in the process.
  bool kernel_tls = false;

  double calls_per_sec() const { return calls / seconds; }
  double gb_per_sec() const { return calls * static_cast<double>(bytes_per_call) / seconds / 1e9; }
  // Latency of the calls: `p` in [0, 1].
  double Percentile(double p) const { return pstrain::Percentile(latency_ms, p); }
};

// Runs `call` on `clients` threads for `seconds` after a short warm-up;
// `call(c)` returns false on error (the run stops). `at_warm`, when given,
// runs on this thread as the warm-up ends: when the calls counted begin.
Result RunClients(int clients, double seconds, const std::function<absl::Status(int)>& call,
                  const std::function<void()>& at_warm = nullptr) {
  Result r;
  absl::Mutex mu;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  const absl::Time warm_until = absl::Now() + absl::Milliseconds(300);
  const absl::Time end = warm_until + absl::Seconds(seconds);
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> lat;
      int64_t n = 0;
      while (!failed) {
        const absl::Time t0 = absl::Now();
        if (t0 >= end) break;
        absl::Status s = call(c);
        if (!s.ok()) {
          std::fprintf(stderr, "ps_bench: %s\n", std::string(s.message()).c_str());
          failed = true;
          break;
        }
        if (t0 >= warm_until) {
          lat.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
          ++n;
        }
      }
      absl::MutexLock lock(&mu);
      r.calls += n;
      r.latency_ms.insert(r.latency_ms.end(), lat.begin(), lat.end());
    });
  }
  if (at_warm) {
    absl::SleepFor(warm_until - absl::Now());
    at_warm();
  }
  for (auto& t : threads) t.join();
  r.seconds = seconds;
  if (failed) r.calls = 0;
  return r;
}

std::string Size(int64_t b) {
  if (b >= (1 << 20) && b % (1 << 20) == 0) return absl::StrCat(b >> 20, " MiB");
  if (b >= 1024 && b % 1024 == 0) return absl::StrCat(b >> 10, " KiB");
  return absl::StrCat(b, " B");
}

// RunClients, also measuring CPU time and page faults per call of servers
// and client. Both are read from the warm-up's end, as the calls are
// counted: what the warm-up's calls and the servers' first touches of their
// memory cost is left out.
Result Measure(const Servers& servers, int clients, double seconds,
               const std::function<absl::Status(int)>& call) {
  double s0 = 0, c0 = 0;
  int64_t sf0 = 0, cf0 = 0;
  Result r = RunClients(clients, seconds, call, [&] {
    s0 = servers.CpuSeconds();
    c0 = CpuSeconds().value_or(0);
    sf0 = servers.MinorFaults();
    cf0 = MinorFaults().value_or(0);
  });
  const double calls = std::max<int64_t>(r.calls, 1);
  r.server_cpu_ms = (servers.CpuSeconds() - s0) * 1e3 / calls;
  r.client_cpu_ms = (CpuSeconds().value_or(0) - c0) * 1e3 / calls;
  r.server_faults = (servers.MinorFaults() - sf0) / calls;
  r.client_faults = (MinorFaults().value_or(0) - cf0) / calls;
  r.connections = TcpConnectionsTo(servers.Ports()).value_or(-1);
  return r;
}

void PrintHeader() {
  std::printf("%-22s %3s %3s %8s %10s %9s %8s %8s %10s %8s %8s %8s %8s %5s\n", "scenario", "ps",
              "cl", "bytes", "calls/s", "GB/s", "p50 ms", "p99 ms", "srv RSS", "srv cpu", "cl cpu",
              "srv flt", "cl flt", "conns");
}

void Print(const std::string& name, int ps, int clients, int64_t bytes, Result& r) {
  std::printf("%-22s %3d %3d %8s %10.0f %9.3f %8.3f %8.3f %6.0f MiB %8.3f %8.3f %8.1f %8.1f %5d\n",
              name.c_str(), ps, clients, Size(bytes).c_str(), r.calls_per_sec(), r.gb_per_sec(),
              r.Percentile(0.5), r.Percentile(0.99), r.server_rss / 1048576.0, r.server_cpu_ms,
              r.client_cpu_ms, r.server_faults, r.client_faults, r.connections);
  std::fflush(stdout);
}

// A model of one variable of `bytes` per PS, so every call touches every PS.
Placement OneTensorPerPs(int num_ps, int64_t bytes) {
  std::vector<VariableDef> vars;
  for (int i = 0; i < num_ps; ++i) {
    VariableDef v{absl::StrCat("t", i), {bytes / 4}};
    v.initializer = "zeros";
    vars.push_back(v);
  }
  PlacementOptions po;
  po.min_slice_bytes = int64_t{1} << 40;  // never split
  return *ComputePlacement(vars, num_ps, po);
}

// How the PS clients' frames travel: "tcp" (the PS's frame port, the
// default between hosts), "tls" (that port inside TLS, --certs), "grpc" (the
// Exchange stream) or "shm" (the Exchange stream with tensor bytes in
// shared memory, as on one host).
std::string g_transport = "tcp";
// --wire_dtype=bfloat16: the PS clients' tensors cross as bfloat16 (the
// rates still count the float32 bytes the callers push and pull).
bool g_bfloat16 = false;

// A client of the PS in `servers` as replica `replica`, its frames over
// `transport` (default: --transport).
absl::StatusOr<std::unique_ptr<client::PsClient>> ClientOf(const Servers& servers,
                                                           const Placement& placement,
                                                           int replica = 0,
                                                           const std::string& transport = "") {
  const std::string& t = transport.empty() ? g_transport : transport;
  client::PsClientOptions o;
  o.ps_addresses = servers.addresses;
  o.replica = replica;
  o.shared_memory = t == "shm";
  o.tcp_frames = t == "tcp" || t == "tls";
  o.security = SecurityFor(t);
  o.bfloat16_wire = g_bfloat16;
  // Client threads stand in for workers, each with its own connections.
  o.own_connection = true;
  return client::PsClient::Create(o, placement);
}

// How a stream's frames went: "tcp", "shm" (in the gRPC stream, tensor
// bytes in shared memory) or "grpc".
std::string TransportOf(bool over_tcp, bool over_tls, bool shared) {
  return over_tcp ? (over_tls ? "tls" : "tcp") : shared ? "shm" : "grpc";
}

// Who sealed the records of a TLS frames figure, for its summary line.
const char* TlsSealing(bool kernel) {
  return kernel ? "; records sealed by the kernel (kTLS)"
                : "; records sealed by OpenSSL in the processes (see the log for why)";
}

// FailedPrecondition naming the scenario when `client`'s frames to any PS
// did not go the way `asked` says (a bench measures what it names).
absl::Status CheckTransport(const std::string& scenario, const client::PsClient& client,
                            const std::string& asked) {
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    const std::string used =
        TransportOf(client.frames_over_tcp(ps), client.frames_over_tls(ps),
                    client.SharedMemoryFrames() > 0);
    if (used != (asked == "grpc_tls" ? "grpc" : asked)) {
      return absl::FailedPreconditionError(absl::StrCat(
          scenario, ": asked for --transport=", asked, " but the frames to ps:", ps,
          " went over ", used));
    }
  }
  return absl::OkStatus();
}

// Creates the client's variables (at `offsets`) under SGD, lr 0.01, for a
// job of `num_replicas` replicas.
absl::Status CreateSgd(client::PsClient& client, const std::vector<int64_t>& offsets,
                       int num_replicas) {
  client::CreateOptions create;
  create.optimizer = {"sgd", 0.01f};
  create.num_replicas = num_replicas;
  return client::PsAdmin(&client.control())
      .CreateVariables(client.placement(), {}, offsets, create)
      .status();
}

absl::StatusOr<Result> PsPushPull(int num_ps, int clients, int64_t bytes, double seconds,
                                  const std::string& transport) {
  auto servers = StartServers("ps", num_ps, SecurityFor(transport.empty() ? g_transport : transport));
  if (!servers.ok()) return servers.status();
  const Placement placement = OneTensorPerPs(num_ps, bytes);
  std::vector<int64_t> offsets;
  for (int i = 0; i < num_ps; ++i) offsets.push_back(i * (bytes / 4));
  std::vector<std::unique_ptr<client::PsClient>> cs;
  for (int c = 0; c < clients; ++c) {
    auto client = ClientOf(**servers, placement, c, transport);
    if (!client.ok()) return client.status();
    cs.push_back(*std::move(client));
  }
  PSTRAIN_RETURN_IF_ERROR(CreateSgd(*cs[0], offsets, clients));
  for (int i = 0; i < num_ps; ++i) {
    auto health = cs[0]->Health(i, absl::Seconds(5), true);
    if (!health.ok()) return health.status();
    (*servers)->frame_ports.push_back(health->frame_port());
  }
  const int64_t floats = num_ps * (bytes / 4);
  std::vector<std::vector<float>> grads(clients, std::vector<float>(floats, 1e-3f));
  std::vector<std::vector<float>> params(clients, std::vector<float>(floats));
  Result r = Measure(**servers, clients, seconds, [&](int c) {
    return cs[c]->PushPullAll(grads[c].data(), params[c].data(), offsets).status();
  });
  r.kernel_tls = true;
  for (const auto& c : cs) {
    PSTRAIN_RETURN_IF_ERROR(
        CheckTransport("push_pull", *c, transport.empty() ? g_transport : transport));
    for (int ps = 0; ps < num_ps; ++ps) r.kernel_tls &= c->frames_over_kernel_tls(ps);
  }
  r.bytes_per_call = num_ps * bytes;
  r.server_rss = (*servers)->ResidentBytes();
  return r;
}

absl::StatusOr<Result> EchoPushPull(int num_ps, int clients, int64_t bytes, double seconds) {
  auto servers = StartServers("echo", num_ps);
  if (!servers.ok()) return servers.status();
  // Per client: one stream per server and one payload buffer, reused.
  std::vector<std::vector<std::unique_ptr<client::PsStream>>> streams(clients);
  std::vector<std::string> payload(clients, std::string(bytes, '\1'));
  for (int c = 0; c < clients; ++c) {
    for (int i = 0; i < num_ps; ++i) {
      auto channel =
          grpc::CreateCustomChannel((*servers)->addresses[i].ToString(),
                                    grpc::InsecureChannelCredentials(), LargeMessageArgs());
      streams[c].push_back(
          std::make_unique<client::PsStream>(channel, absl::StrCat("echo:", i), kEchoMethod));
    }
  }
  Result r = Measure(**servers, clients, seconds, [&](int c) -> absl::Status {
    std::vector<absl::Status> results(num_ps);
    std::atomic<int> remaining{num_ps};
    absl::Notification done;
    for (int i = 0; i < num_ps; ++i) {
      v1::FrameHeader h;
      h.add_push()->set_bytes(bytes);
      streams[c][i]->Send(h, {BorrowSlice(payload[c].data(), bytes)},
                          [&, i](const absl::Status& s, const DecodedFrame*) {
                            results[i] = s;
                            if (remaining.fetch_sub(1) == 1) done.Notify();
                          });
    }
    done.WaitForNotification();
    for (const absl::Status& s : results) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  r.bytes_per_call = num_ps * bytes;
  r.server_rss = (*servers)->ResidentBytes();
  return r;
}

// 1 PS and 1 echo server, one client each, their push-then-pull calls of
// `bytes` taking turns call by call for `seconds`: both see the same state of
// a shared, noisy machine, so the ratio of their median call times holds
// still where separate runs drift. Prints the medians; returns the ratio
// (echo's median time over the PS's: the PS's calls/s relative to echo's).
absl::StatusOr<double> Alternating(int64_t bytes, double seconds) {
  auto ps_servers = StartServers("ps", 1, SecurityFor(g_transport));
  if (!ps_servers.ok()) return ps_servers.status();
  auto echo_servers = StartServers("echo", 1);
  if (!echo_servers.ok()) return echo_servers.status();
  const Placement placement = OneTensorPerPs(1, bytes);
  const std::vector<int64_t> offsets = {0};
  auto client = ClientOf(**ps_servers, placement);
  if (!client.ok()) return client.status();
  PSTRAIN_RETURN_IF_ERROR(CreateSgd(**client, offsets, 1));
  client::PsStream echo(
      grpc::CreateCustomChannel((*echo_servers)->addresses[0].ToString(),
                                grpc::InsecureChannelCredentials(), LargeMessageArgs()),
      "echo:0", kEchoMethod);
  const std::string payload(bytes, '\1');
  std::vector<float> grads(bytes / 4, 1e-3f), params(bytes / 4);
  auto echo_call = [&]() -> absl::Status {
    absl::Status result;
    absl::Notification done;
    v1::FrameHeader h;
    h.add_push()->set_bytes(bytes);
    echo.Send(h, {BorrowSlice(payload.data(), bytes)},
              [&](const absl::Status& s, const DecodedFrame*) {
                result = s;
                done.Notify();
              });
    done.WaitForNotification();
    return result;
  };
  std::vector<double> ps_ms, echo_ms;
  const absl::Time warm_until = absl::Now() + absl::Milliseconds(300);
  const absl::Time end = warm_until + absl::Seconds(seconds);
  while (absl::Now() < end) {
    const absl::Time t0 = absl::Now();
    absl::Status s = (*client)->PushPullAll(grads.data(), params.data(), offsets).status();
    const absl::Time t1 = absl::Now();
    if (s.ok()) s = echo_call();
    if (!s.ok()) return s;
    if (t0 >= warm_until) {
      ps_ms.push_back(absl::ToDoubleMilliseconds(t1 - t0));
      echo_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t1));
    }
  }
  if (ps_ms.empty()) return absl::InternalError("no calls were timed");
  PSTRAIN_RETURN_IF_ERROR(CheckTransport("alternating", **client, g_transport));
  const double ps_med = Median(ps_ms), echo_med = Median(echo_ms);
  std::printf(
      "alternating %8s: %zu calls each; median ms ps %.3f (%.0f calls/s), echo %.3f "
      "(%.0f calls/s); ps/echo %.2fx\n",
      Size(bytes).c_str(), ps_ms.size(), ps_med, 1e3 / ps_med, echo_med, 1e3 / echo_med,
      echo_med / ps_med);
  std::fflush(stdout);
  return echo_med / ps_med;
}

absl::StatusOr<Result> Pipelined(int clients, int64_t bytes, int inflight, double seconds) {
  const std::shared_ptr<const Security> security = SecurityFor(g_transport);
  auto servers = StartServers("ps", 1, security);
  if (!servers.ok()) return servers.status();
  const Placement placement = OneTensorPerPs(1, bytes);
  auto creator = ClientOf(**servers, placement);
  if (!creator.ok()) return creator.status();
  PSTRAIN_RETURN_IF_ERROR(CreateSgd(**creator, {0}, clients));
  auto health = (*creator)->Health(0, absl::Seconds(5), true);
  if (!health.ok()) return health.status();
  const int frame_port = health->frame_port();
  (*servers)->frame_ports.push_back(frame_port);
  // Each client's frames go as --transport says: over the PS's frame port,
  // in the gRPC stream, or there with the tensor bytes in shared memory.
  std::optional<client::TcpRoute> route;
  if (g_transport == "tcp" || g_transport == "tls") {
    route = client::TcpRoute{"127.0.0.1", [frame_port] { return frame_port; },
                             security != nullptr ? security->token() : ""};
    if (security != nullptr) {
      PSTRAIN_ASSIGN_OR_RETURN(route->tls, FrameTls::Make(*security, FrameTls::Side::kClient));
    }
  }
  const int64_t shared_bytes = g_transport == "shm" ? (inflight + 1) * bytes : 0;
  std::vector<std::unique_ptr<client::PsStream>> streams;
  for (int c = 0; c < clients; ++c) {
    grpc::ChannelArguments args = LargeMessageArgs();
    // A channel of its own per client: its own connection.
    args.SetInt("pstrain.bench_client", c);
    streams.push_back(std::make_unique<client::PsStream>(
        security != nullptr
            ? security->CreateChannel((*servers)->addresses[0].ToString(), args)
            : grpc::CreateCustomChannel((*servers)->addresses[0].ToString(),
                                        grpc::InsecureChannelCredentials(), args),
        "ps:0", "/pstrain.v1.PsService/Exchange", shared_bytes, route));
  }
  std::vector<float> grad(bytes / 4, 1e-3f);
  // Each "call" is one push; a client keeps `inflight` of them outstanding.
  struct Window {
    absl::Mutex mu;
    int outstanding = 0;
    absl::Status error;
  };
  std::vector<Window> windows(clients);
  Result r = Measure(**servers, clients, seconds, [&](int c) -> absl::Status {
    Window& w = windows[c];
    {
      absl::MutexLock lock(&w.mu);
      auto room = [&] { return w.outstanding < inflight; };
      w.mu.Await(absl::Condition(&room));
      if (!w.error.ok()) return w.error;
      ++w.outstanding;
    }
    v1::FrameHeader h;
    h.set_replica(c);
    v1::TensorRef* t = h.add_push();
    t->set_key("t0/part_0");
    t->set_bytes(bytes);
    streams[c]->Send(h, {BorrowSlice(grad.data(), bytes)},
                     [&w](const absl::Status& s, const DecodedFrame*) {
                       absl::MutexLock lock(&w.mu);
                       --w.outstanding;
                       if (!s.ok() && w.error.ok()) w.error = s;
                     });
    return absl::OkStatus();
  });
  for (Window& w : windows) {
    absl::MutexLock lock(&w.mu);
    auto drained = [&] { return w.outstanding == 0; };
    w.mu.Await(absl::Condition(&drained));
  }
  r.kernel_tls = true;
  for (int c = 0; c < clients; ++c) {
    r.kernel_tls &= streams[c]->over_kernel_tls();
    const std::string used =
        TransportOf(streams[c]->over_tcp(), streams[c]->over_tls(), streams[c]->shared_frames() > 0);
    if (used != g_transport) {
      return absl::FailedPreconditionError(
          absl::StrCat("pipelined: asked for --transport=", g_transport, " but client ", c,
                       "'s frames went over ", used));
    }
  }
  r.bytes_per_call = bytes;
  r.latency_ms.clear();  // per-send times, not round trips: not reported
  r.server_rss = (*servers)->ResidentBytes();
  return r;
}

// A dense model of `model_bytes` in variables of at most 64 MiB, and their
// offsets in the flat layout.
void DenseModel(int64_t model_bytes, std::vector<VariableDef>* vars,
                std::vector<int64_t>* offsets) {
  const int64_t var_bytes = int64_t{64} << 20;
  for (int64_t at = 0, i = 0; at < model_bytes; at += var_bytes, ++i) {
    const int64_t b = std::min(var_bytes, model_bytes - at);
    VariableDef v{absl::StrCat("layer_", i), {b / 4 / 1024, 1024}};
    v.initializer = "uniform:0.05";
    vars->push_back(v);
    offsets->push_back(at / 4);
  }
}

// PS counts a checkpoint written by kSavePs PS is restored onto: the same
// count (each PS reads its own shard) and others (re-sliced from every
// shard, checkpoint/reshard.h).
constexpr int kSavePs = 2;
constexpr int kRestorePs[] = {2, 3, 1};

struct CheckpointTimes {
  double save_s = 0;  // SaveCheckpoint RPC on every PS, as the chief sees it
  // CreateVariables with a restore on fresh PS, per kRestorePs entry.
  std::vector<double> restore_s;
  int64_t bytes = 0;  // all shards
};

// kSavePs PS with `vars` under Adam, trained one round, checkpointed into
// `dir`; then fresh clusters of each kRestorePs count restore it, and their
// values are checked against the first.
absl::StatusOr<CheckpointTimes> SaveAndRestore(const std::vector<VariableDef>& vars,
                                               const std::vector<int64_t>& offsets, int64_t floats,
                                               const std::string& dir) {
  client::CreateOptions create;
  create.optimizer.name = "adam";
  create.optimizer.learning_rate = 1e-3f;
  std::vector<float> before(floats), after(floats), grads(floats, 1e-3f);
  CheckpointTimes t;
  // Round 0 saves, the others restore, each with PS processes of their own.
  for (int round = 0; round <= static_cast<int>(std::size(kRestorePs)); ++round) {
    const int num_ps = round == 0 ? kSavePs : kRestorePs[round - 1];
    auto placement = ComputePlacement(vars, num_ps);
    if (!placement.ok()) return placement.status();
    auto servers = StartServers("ps", num_ps);
    if (!servers.ok()) return servers.status();
    auto client = ClientOf(**servers, *placement);
    if (!client.ok()) return client.status();
    if (round > 0) {
      create.restore_dir = dir;
      create.restore_step = 1;
      create.restore_num_ps = kSavePs;
    }
    const absl::Time t0 = absl::Now();
    client::PsAdmin admin(&(*client)->control());
    PSTRAIN_RETURN_IF_ERROR(admin.CreateVariables(*placement, {}, offsets, create).status());
    if (round > 0) {
      t.restore_s.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
      PSTRAIN_RETURN_IF_ERROR((*client)->PullAll(after.data(), offsets).status());
      if (after != before) {
        return absl::DataLossError(
            absl::StrCat("values restored onto ", num_ps, " PS differ from those saved"));
      }
      continue;
    }
    PSTRAIN_RETURN_IF_ERROR((*client)->PushPullAll(grads.data(), before.data(), offsets).status());
    const absl::Time t1 = absl::Now();
    auto saved = admin.SaveCheckpoint(dir, 1, absl::Minutes(10));
    if (!saved.ok()) return saved.status();
    t.save_s = absl::ToDoubleSeconds(absl::Now() - t1);
    for (const v1::SaveCheckpointResponse& r : *saved) t.bytes += r.bytes();
  }
  return t;
}

// Checkpoint write and restore times: the Fashion-MNIST guide MLP and a
// dense model of model_mib MiB, both with Adam's slots, written by kSavePs
// PS and restored onto each kRestorePs count.
absl::Status Checkpoint(int64_t model_mib, int repeat) {
  std::string dir = "/tmp/ps_bench_ckpt_XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return absl::InternalError("cannot create a temp dir");
  struct Model {
    std::string name;
    std::vector<VariableDef> vars;
    std::vector<int64_t> offsets;
    int64_t floats = 0;
  };
  std::vector<Model> models(2);
  models[0].name = "Fashion-MNIST MLP 784-256-256-10";
  for (auto [in, out] : {std::pair<int64_t, int64_t>{784, 256}, {256, 256}, {256, 10}}) {
    const int l = static_cast<int>(models[0].vars.size() / 2);
    models[0].vars.push_back({absl::StrCat("dense_", l, "/kernel"), {in, out}});
    models[0].vars.push_back({absl::StrCat("dense_", l, "/bias"), {out}});
  }
  for (VariableDef& v : models[0].vars) {
    v.initializer = "uniform:0.05";
    models[0].offsets.push_back(models[0].floats);
    models[0].floats += v.elements();
  }
  models[1].name = absl::StrCat(model_mib, " MiB dense model");
  DenseModel(model_mib << 20, &models[1].vars, &models[1].offsets);
  models[1].floats = (model_mib << 20) / 4;
  for (size_t m = 0; m < models.size(); ++m) {
    std::vector<double> save;
    std::vector<std::vector<double>> restore(std::size(kRestorePs));
    int64_t bytes = 0;
    for (int r = 0; r < repeat; ++r) {
      const std::string sub = absl::StrCat(dir, "/m", m, "_r", r);
      auto t = SaveAndRestore(models[m].vars, models[m].offsets, models[m].floats, sub);
      if (!t.ok()) return t.status();
      save.push_back(t->save_s);
      for (size_t k = 0; k < std::size(kRestorePs); ++k) restore[k].push_back(t->restore_s[k]);
      bytes = t->bytes;
      std::error_code ec;
      std::filesystem::remove_all(sub, ec);
    }
    const double s = Median(save);
    std::printf(
        "checkpoint: %s with Adam, %.1f MiB in %d shards: write %.3f s (%.2f GB/s); "
        "medians of %d\n",
        models[m].name.c_str(), bytes / 1048576.0, kSavePs, s, bytes / s / 1e9, repeat);
    for (size_t k = 0; k < std::size(kRestorePs); ++k) {
      const double rs = Median(restore[k]);
      std::printf("  restore onto %d fresh PS%s: %.3f s (%.2f GB/s)\n", kRestorePs[k],
                  kRestorePs[k] == kSavePs ? " (same count)" : " (re-sliced)", rs,
                  bytes / rs / 1e9);
    }
    std::fflush(stdout);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return absl::OkStatus();
}

absl::Status Memory(int64_t model_mib) {
  auto servers = StartServers("ps", 1);
  if (!servers.ok()) return servers.status();
  const int64_t model_bytes = model_mib << 20;
  std::vector<VariableDef> vars;
  std::vector<int64_t> offsets;
  DenseModel(model_bytes, &vars, &offsets);
  PlacementOptions po;
  auto placement = ComputePlacement(vars, 1, po);
  if (!placement.ok()) return placement.status();
  auto client = ClientOf(**servers, *placement);
  if (!client.ok()) return client.status();
  client::CreateOptions create;
  create.optimizer.name = "adam";
  create.optimizer.learning_rate = 1e-3f;
  const absl::Time t0 = absl::Now();
  auto created =
      client::PsAdmin(&(*client)->control()).CreateVariables(*placement, {}, offsets, create);
  if (!created.ok()) return created.status();
  const double create_s = absl::ToDoubleSeconds(absl::Now() - t0);
  const int64_t after_create = (*servers)->ResidentBytes();
  std::vector<float> grads(model_bytes / 4, 1e-4f), params(model_bytes / 4);
  const absl::Time t1 = absl::Now();
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    auto step = (*client)->PushPullAll(grads.data(), params.data(), offsets);
    if (!step.ok()) return step.status();
    std::printf("  after round %d: PS RSS %.0f MiB\n", round + 1,
                (*servers)->ResidentBytes() / 1048576.0);
  }
  const double train_s = absl::ToDoubleSeconds(absl::Now() - t1);
  const int64_t rss = (*servers)->ResidentBytes();
  const int64_t held = 3 * model_bytes;  // values and Adam's two slots
  const double limit = 1.15 * held + (64 << 20);
  std::printf("memory: %" PRId64 " MiB model, Adam: values + slots %" PRId64
              " MiB; PS RSS after create %.0f MiB, after %d push-pull rounds %.0f MiB "
              "= %.3fx (limit 1.15x + 64 MiB = %.0f MiB: %s); create %.1f s, %.2f GB/s "
              "each way while training\n",
              model_mib, held >> 20, after_create / 1048576.0, kRounds, rss / 1048576.0,
              static_cast<double>(rss) / held, limit / 1048576.0, rss <= limit ? "met" : "NOT met",
              create_s, kRounds * static_cast<double>(model_bytes) / train_s / 1e9);
  return absl::OkStatus();
}

std::vector<int64_t> ParseSizes(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v;
    if (absl::SimpleAtoi(p, &v) && v >= 4 && v % 4 == 0) out.push_back(v);
  }
  return out;
}

int Main(int argc, char** argv) {
  // Servers (echo included) and clients alike: see base/malloc_tuning.h.
  TuneMallocForLargeMessages();
  auto args = CliArgs::Parse(argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "ps_bench: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  g_certs_dir = args->GetString("certs", "").value_or("");
  if (!g_certs_dir.empty()) {
    absl::StatusOr<std::shared_ptr<const Security>> loaded = Security::Load(CertsDirConfig(g_certs_dir));
    if (!loaded.ok()) {
      std::fprintf(stderr, "ps_bench: --certs=%s: %s\n", g_certs_dir.c_str(),
                   std::string(loaded.status().message()).c_str());
      return 2;
    }
    g_security = *std::move(loaded);
  }
  auto serve = args->GetString("serve", "");
  if (serve.ok() && !serve->empty()) {
    const int port = static_cast<int>(args->GetInt("port", 0).value_or(0));
    const int index = static_cast<int>(args->GetInt("ps_index", 0).value_or(0));
    const int num = static_cast<int>(args->GetInt("num_ps", 1).value_or(1));
    return Serve(*serve, port, index, num);
  }
  const std::string scenario = args->GetString("scenario", "all").value_or("all");
  const int num_ps = static_cast<int>(args->GetInt("ps", 0).value_or(0));
  const int clients = static_cast<int>(args->GetInt("clients", 0).value_or(0));
  const std::string sizes_text = args->GetString("bytes", "4194304,4096").value_or("");
  const double seconds = args->GetDouble("seconds", 3).value_or(3);
  const int inflight = static_cast<int>(args->GetInt("inflight", 4).value_or(4));
  const int64_t model_mib = args->GetInt("model_mib", 1024).value_or(1024);
  const int repeat = static_cast<int>(args->GetInt("repeat", 3).value_or(3));
  const bool shared = args->GetBool("shared_memory", false).value_or(false);
  g_transport = args->GetString("transport", "tcp").value_or("");
  const std::string wire_dtype = args->GetString("wire_dtype", "float32").value_or("");
  g_bfloat16 = wire_dtype == "bfloat16";
  absl::Status unused = args->CheckAllUsed();
  const std::vector<int64_t> sizes = ParseSizes(sizes_text);
  if (!unused.ok() || sizes.empty() || seconds <= 0 || inflight < 1 || model_mib < 1 ||
      repeat < 1 ||
      (g_transport != "tcp" && g_transport != "tls" && g_transport != "grpc" &&
       g_transport != "shm") ||
      (g_transport == "tls" && g_security == nullptr) ||
      (wire_dtype != "float32" && wire_dtype != "bfloat16") ||
      (scenario != "all" && scenario != "push_pull" && scenario != "pipelined" &&
       scenario != "memory" && scenario != "checkpoint" && scenario != "alternating")) {
    std::fprintf(stderr,
                 "ps_bench: %s\nusage: ps_bench "
                 "[--scenario=all|push_pull|alternating|pipelined|memory|checkpoint] "
                 "[--ps=M] [--clients=N] [--bytes=B,...] (multiples of 4) [--seconds=S] "
                 "[--inflight=K] [--model_mib=MiB] [--repeat=R] [--shared_memory] "
                 "[--transport=tcp|tls|grpc|shm] [--certs=DIR] (tls needs --certs: a "
                 "directory deploy/make_certs.sh made; with it push_pull adds tls) "
                 "[--wire_dtype=float32|bfloat16]\n",
                 unused.ok() ? "bad flag value" : std::string(unused.message()).c_str());
    return 2;
  }
  // (ps, clients) pairs: the two the issue asks for unless one is named.
  std::vector<std::pair<int, int>> shapes;
  if (num_ps > 0 || clients > 0) {
    shapes.push_back({std::max(num_ps, 1), std::max(clients, 1)});
  } else {
    shapes = {{1, 1}, {2, 2}};
  }
  int failures = 0;
  auto report = [&](const absl::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "ps_bench: %s\n", std::string(s.message()).c_str());
      ++failures;
    }
  };
  if (scenario == "all" || scenario == "push_pull") {
    PrintHeader();
    for (auto [m, n] : shapes) {
      for (int64_t b : sizes) {
        // PS and echo alternate, `repeat` times each; the medians and the
        // median of the per-pair ratios are the figures (the machine is
        // shared and noisy).
        // Each round: the PS with its clients' frames over TCP, then in the
        // gRPC stream (then with shared memory, when asked), then the echo.
        std::vector<std::string> transports = {"tcp", "grpc"};
        // With --certs: the frame port inside TLS, and the gRPC stream
        // inside gRPC's TLS (where a TLS job's frames went before).
        if (g_security != nullptr) {
          transports.insert(transports.begin() + 1, "tls");
          transports.push_back("grpc_tls");
        }
        if (shared) transports.push_back("shm");
        std::map<std::string, std::vector<double>> rates, ratios;
        std::map<std::string, bool> kernel_tls;  // every round's records by the kernel
        std::vector<double> echo_rates;
        for (int rep = 0; rep < repeat; ++rep) {
          std::map<std::string, double> round;
          for (const std::string& t : transports) {
            auto ps = PsPushPull(m, n, b, seconds, t);
            report(ps.status());
            if (!ps.ok()) continue;
            Print(("push_pull ps " + t).c_str(), m, n, b, *ps);
            round[t] = ps->calls_per_sec();
            kernel_tls.try_emplace(t, true).first->second &= ps->kernel_tls;
          }
          auto echo = EchoPushPull(m, n, b, seconds);
          report(echo.status());
          if (!echo.ok()) continue;
          Print("push_pull echo", m, n, b, *echo);
          echo_rates.push_back(echo->calls_per_sec());
          for (const auto& [t, rate] : round) {
            rates[t].push_back(rate);
            ratios[t].push_back(rate / echo->calls_per_sec());
          }
        }
        if (echo_rates.empty()) continue;
        const double echo_med = Median(echo_rates);
        std::printf("  median of %zu: echo %.0f calls/s = %.3f GB/s each way\n", echo_rates.size(),
                    echo_med, echo_med * m * b / 1e9);
        for (const std::string& t : transports) {
          if (rates[t].empty()) continue;
          const double med = Median(rates[t]);
          std::printf(
              "  median of %zu: ps over %-4s %.0f calls/s = %.3f GB/s each way; %.2fx the "
              "echo (median of the rounds' ratios)%s\n",
              rates[t].size(), t.c_str(), med, med * m * b / 1e9, Median(ratios[t]),
              t == "tls" ? TlsSealing(kernel_tls[t]) : "");
        }
        std::fflush(stdout);
      }
    }
  }
  if (scenario == "all" || scenario == "alternating") {
    for (int64_t b : sizes) {
      // Rounds of `seconds` each; the median of their ratios.
      std::vector<double> ratios;
      for (int rep = 0; rep < repeat; ++rep) {
        auto r = Alternating(b, seconds);
        report(r.status());
        if (r.ok()) ratios.push_back(*r);
      }
      if (!ratios.empty()) {
        std::printf("  median of %zu: ps/echo %.2fx, alternating call by call\n", ratios.size(),
                    Median(ratios));
      }
    }
  }
  if (scenario == "all" || scenario == "pipelined") {
    PrintHeader();
    for (int64_t b : sizes) {
      if (b < (1 << 20)) continue;  // a layer-by-layer push of big tensors
      // The client counts take turns, `repeat` rounds; a median for each.
      std::map<int, std::vector<double>> rates;
      std::map<int, bool> kernel_tls;
      for (int rep = 0; rep < repeat; ++rep) {
        for (auto [m, n] : shapes) {
          (void)m;
          auto r = Pipelined(n, b, inflight, seconds);
          report(r.status());
          if (!r.ok()) continue;
          Print(absl::StrCat("pipelined x", inflight, " ", g_transport), 1, n, b, *r);
          rates[n].push_back(r->gb_per_sec());
          kernel_tls.try_emplace(n, true).first->second &= r->kernel_tls;
        }
      }
      for (const auto& [n, r] : rates) {
        std::printf(
            "  median of %zu: pipelined over %s, %d in flight, %d client%s: %.3f GB/s one "
            "way%s\n",
            r.size(), g_transport.c_str(), inflight, n, n == 1 ? "" : "s", Median(r),
            g_transport == "tls" ? TlsSealing(kernel_tls[n]) : "");
      }
      std::fflush(stdout);
    }
  }
  if (scenario == "all" || scenario == "memory") report(Memory(model_mib));
  if (scenario == "all" || scenario == "checkpoint") report(Checkpoint(model_mib, repeat));
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pstrain::bench

int main(int argc, char** argv) { return pstrain::bench::Main(argc, argv); }
