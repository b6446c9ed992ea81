// ps_load: a load test of one real PS daemon (the pstrain binary, started
// as ps:0 with a cluster token, and mutual TLS when --certs is given) under
// many concurrent clients, a share of whose requests are malformed or
// unauthenticated.
//
//   bazel-bin/bench/ps_load [--pstrain=PATH] [--clients=32] [--seconds=60]
//       [--bad_every=4] [--floats=1024] [--certs=DIR] [--warmup_s=10]
//
// Each client thread loops for --seconds: every --bad_every-th request is
// bad, cycling through a wrong token, no token, a payload shorter than the
// tensor, a NaN gradient, an unknown tensor and a frame past the ids limit;
// the others push a gradient of ones to a dense variable of --floats floats
// (SGD, learning rate 1) and pull it back in one round trip. At the end the
// variable must hold exactly -(pushes acknowledged): no update lost, none
// applied twice, no bad request applied. The PS's resident memory is sampled
// every second; after --warmup_s it must stay flat (within 16 MiB or 5%).
// Prints throughput, p50/p99 latency of the good calls, refusals by kind and
// the memory series; exits 1 when a check fails or the PS dies.
// --certs: a directory made by deploy/make_certs.sh (ca.pem, cert.pem,
// key.pem, token); without it, a random token and no TLS.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/cli_args.h"
#include "base/file_util.h"
#include "base/median.h"
#include "base/status_macros.h"
#include "cluster/placement.h"
#include "transport/security.h"
#include "base/subprocess.h"
#include "transport/wire_frame.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "client/ps_stream.h"

namespace pstrain::bench {
namespace {

enum Bad { kWrongToken, kNoToken, kShortPayload, kNan, kUnknownTensor, kTooManyIds, kBadKinds };
const char* const kBadName[] = {"wrong token",    "no token",      "short payload",
                                "NaN gradient",   "unknown tensor", "ids past the limit"};

struct Totals {
  absl::Mutex mu;
  std::vector<double> latency_ms ABSL_GUARDED_BY(mu);
  int64_t pushes ABSL_GUARDED_BY(mu) = 0;
  int64_t good_failed ABSL_GUARDED_BY(mu) = 0;
  int64_t bad_sent[kBadKinds] ABSL_GUARDED_BY(mu) = {};
  int64_t bad_refused[kBadKinds] ABSL_GUARDED_BY(mu) = {};
  std::string first_error ABSL_GUARDED_BY(mu);
};

// Latency percentile `p` for the report; "-" when there were no calls.
std::string LatencyMs(const std::vector<double>& v, double p) {
  return v.empty() ? "-" : absl::StrFormat("%.3f", Percentile(v, p));
}

struct LoadOptions {
  std::string pstrain;
  int64_t clients = 32;
  int64_t seconds = 60;
  int64_t bad_every = 4;
  int64_t floats = 1024;
  std::string certs;
  int64_t warmup_s = 10;
};

absl::StatusOr<LoadOptions> ParseOptions(CliArgs& args) {
  std::string self_dir = SelfExecutablePath();
  self_dir = self_dir.empty() ? "bazel-bin/bench" : self_dir.substr(0, self_dir.rfind('/'));
  LoadOptions o;
  PSTRAIN_ASSIGN_OR_RETURN(o.pstrain, args.GetString("pstrain", self_dir + "/../pstrain"));
  PSTRAIN_ASSIGN_OR_RETURN(o.clients, args.GetInt("clients", o.clients));
  PSTRAIN_ASSIGN_OR_RETURN(o.seconds, args.GetInt("seconds", o.seconds));
  PSTRAIN_ASSIGN_OR_RETURN(o.bad_every, args.GetInt("bad_every", o.bad_every));
  PSTRAIN_ASSIGN_OR_RETURN(o.floats, args.GetInt("floats", o.floats));
  PSTRAIN_ASSIGN_OR_RETURN(o.certs, args.GetString("certs", ""));
  PSTRAIN_ASSIGN_OR_RETURN(o.warmup_s, args.GetInt("warmup_s", o.warmup_s));
  PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
  if (o.clients < 1 || o.clients > 1024 || o.seconds < 1 || o.bad_every < 1 || o.floats < 1 ||
      o.floats > (1 << 24) || o.warmup_s < 0 || o.warmup_s >= o.seconds) {
    return absl::InvalidArgumentError(
        "--clients in 1..1024, --seconds >= 1, --bad_every >= 1, --floats in 1..16M, "
        "0 <= --warmup_s < --seconds");
  }
  return o;
}

// The job's security, and the wrong kinds: another token, none.
struct Securities {
  std::shared_ptr<const Security> good, wrong, none;
  std::vector<std::string> ps_flags;  // the PS's security flags
};

// --certs' files, or a random token written under `scratch`.
absl::StatusOr<Securities> LoadSecurities(const LoadOptions& o, const std::string& scratch) {
  SecurityConfig good_config;
  Securities out;
  std::string token_path = scratch + "-token";
  if (!o.certs.empty()) {
    good_config = CertsDirConfig(o.certs, /*token=*/false);
    token_path = o.certs + "/token";
    out.ps_flags = {"--tls_cert=" + good_config.tls_cert, "--tls_key=" + good_config.tls_key,
                    "--tls_ca=" + good_config.tls_ca};
  } else {
    std::random_device rd;
    std::ofstream(token_path) << absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  }
  good_config.token_file = token_path;
  out.ps_flags.push_back("--token_file=" + token_path);
  PSTRAIN_ASSIGN_OR_RETURN(out.good, Security::Load(good_config));
  SecurityConfig wrong_config = good_config;
  wrong_config.token_file.clear();
  wrong_config.token = "this-is-not-the-cluster-token";
  SecurityConfig none_config = good_config;
  none_config.token_file.clear();
  auto wrong = Security::Load(wrong_config);
  auto none = Security::Load(none_config);
  if (!wrong.ok() || !none.ok()) return absl::InternalError("cannot load the bad configs");
  out.wrong = *wrong;
  out.none = *none;
  return out;
}

// What every client thread shares.
struct Load {
  LoadOptions options;
  Securities security;
  HostPort address;
  Placement placement;
  std::string w_key;  // the dense variable's slice

  absl::StatusOr<std::unique_ptr<client::PsClient>> Client(
      std::shared_ptr<const Security> with, int replica) const {
    client::PsClientOptions o;
    o.ps_addresses = {address};
    o.replica = replica;
    o.rpc_deadline = absl::Seconds(30);
    o.security = std::move(with);
    return client::PsClient::Create(o, placement);
  }
};

// Bad request `kind` number `i`: sent through the clients with the wrong
// security, or as a raw frame on `raw`. Returns whether it was refused.
bool SendBad(const Load& load, int kind, int64_t i, client::PsClient& wrong_client,
             client::PsClient& none_client, client::PsStream& raw,
             const std::vector<float>& grad) {
  absl::Status s;
  v1::FrameHeader h;
  v1::TensorRef* r = h.add_push();
  r->set_key(load.w_key);
  std::string payload(load.options.floats * 4, '\0');
  switch (kind) {
    case kWrongToken:
      s = wrong_client.PushAll(grad.data(), {0});
      break;
    case kNoToken:
      s = none_client.PushAll(grad.data(), {0});
      break;
    case kShortPayload:
      payload.resize(12);
      break;
    case kNan: {
      const float nan = std::nanf("");
      std::memcpy(&payload[4 * (i % load.options.floats)], &nan, 4);
      break;
    }
    case kUnknownTensor:
      r->set_key("no/such/tensor");
      break;
    case kTooManyIds:
      h.clear_push();
      r = h.add_pull();
      r->set_key("emb");
      for (int k = 0; k < 5000; ++k) r->add_ids(k);
      payload.clear();
      break;
  }
  if (kind >= kShortPayload) {
    s = raw.Call(h, {grpc::Slice(payload)}, absl::Seconds(30),
                 [](const DecodedFrame&) { return absl::OkStatus(); });
  }
  return !s.ok();
}

// Client thread `c`: good push-then-pulls, every bad_every-th request a
// bad one, until `stop`; its counts added to *totals.
void ClientLoop(const Load& load, int c, const std::atomic<bool>& stop, Totals* totals) {
  auto client = load.Client(load.security.good, c);
  auto wrong_client = load.Client(load.security.wrong, c);
  auto none_client = load.Client(load.security.none, c);
  if (!client.ok() || !wrong_client.ok() || !none_client.ok()) return;
  grpc::ChannelArguments channel_args;
  channel_args.SetInt("pstrain.load_client", c);
  client::PsStream raw(
      load.security.good->CreateChannel(load.address.ToString(), channel_args), "ps:0");
  const int64_t bad_every = load.options.bad_every;
  std::vector<float> grad(load.options.floats, 1.0f), params(load.options.floats);
  std::vector<double> latency;
  int64_t pushes = 0, good_failed = 0;
  int64_t sent[kBadKinds] = {}, refused[kBadKinds] = {};
  std::string first_error;
  for (int64_t i = c; !stop.load(std::memory_order_relaxed); ++i) {
    if (i % bad_every == bad_every - 1) {
      const int kind = static_cast<int>((i / bad_every) % kBadKinds);
      ++sent[kind];
      if (SendBad(load, kind, i, **wrong_client, **none_client, raw, grad)) ++refused[kind];
      continue;
    }
    const absl::Time t0 = absl::Now();
    auto step = (*client)->PushPullAll(grad.data(), params.data(), {0});
    if (step.ok()) {
      ++pushes;
      latency.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    } else {
      ++good_failed;
      if (first_error.empty()) first_error = std::string(step.status().message());
    }
  }
  absl::MutexLock lock(&totals->mu);
  totals->latency_ms.insert(totals->latency_ms.end(), latency.begin(), latency.end());
  totals->pushes += pushes;
  totals->good_failed += good_failed;
  for (int k = 0; k < kBadKinds; ++k) {
    totals->bad_sent[k] += sent[k];
    totals->bad_refused[k] += refused[k];
  }
  if (totals->first_error.empty()) totals->first_error = first_error;
}

// What the PS holds and counted at the end.
struct PsEnd {
  bool alive = false;
  std::vector<float> values;
  int64_t refused_auth = 0;
  int64_t refused_limit = 0;
};

// The report of the calls, the bad requests, the sum check and the
// memory series; false when a check fails.
bool Report(const LoadOptions& o, Totals& totals, const PsEnd& end,
            const std::vector<int64_t>& rss, double elapsed) {
  bool ok = end.alive;
  absl::MutexLock lock(&totals.mu);
  int64_t bad_total = 0, bad_refused_total = 0;
  for (int k = 0; k < kBadKinds; ++k) {
    bad_total += totals.bad_sent[k];
    bad_refused_total += totals.bad_refused[k];
  }
  const int64_t calls = totals.pushes + totals.good_failed + bad_total;
  std::printf("calls: %lld in %.1f s = %.0f calls/s; good push-then-pulls %lld = %.0f/s "
              "(%.1f MB/s each way), failed %lld\n",
              static_cast<long long>(calls), elapsed, calls / elapsed,
              static_cast<long long>(totals.pushes), totals.pushes / elapsed,
              totals.pushes * o.floats * 4.0 / elapsed / 1e6,
              static_cast<long long>(totals.good_failed));
  std::printf("latency of good calls: p50 %s ms, p99 %s ms\n",
              LatencyMs(totals.latency_ms, 0.5).c_str(),
              LatencyMs(totals.latency_ms, 0.99).c_str());
  for (int k = 0; k < kBadKinds; ++k) {
    std::printf("bad: %-19s sent %7lld refused %7lld\n", kBadName[k],
                static_cast<long long>(totals.bad_sent[k]),
                static_cast<long long>(totals.bad_refused[k]));
  }
  std::printf("ps counted %lld calls refused unauthenticated, %lld over a limit\n",
              static_cast<long long>(end.refused_auth), static_cast<long long>(end.refused_limit));
  if (bad_refused_total != bad_total) {
    std::printf("FAIL: %lld bad requests were accepted\n",
                static_cast<long long>(bad_total - bad_refused_total));
    ok = false;
  }
  if (totals.good_failed > 0) {
    std::printf("FAIL: %lld good calls failed, the first: %s\n",
                static_cast<long long>(totals.good_failed), totals.first_error.c_str());
    ok = false;
  }
  if (end.alive) {
    const float want = -static_cast<float>(totals.pushes);
    int64_t wrong_elements = 0;
    for (float v : end.values) wrong_elements += v != want;
    std::printf("sum check: every element is %.0f after %lld acknowledged pushes: %s\n",
                end.values[0], static_cast<long long>(totals.pushes),
                wrong_elements == 0 ? "no update lost" : "MISMATCH");
    if (wrong_elements != 0) ok = false;
  }
  if (rss.size() > static_cast<size_t>(o.warmup_s)) {
    const auto after = std::vector<int64_t>(rss.begin() + o.warmup_s, rss.end());
    const int64_t lo = *std::min_element(after.begin(), after.end());
    const int64_t hi = *std::max_element(after.begin(), after.end());
    const int64_t allowed = std::max<int64_t>(16 << 20, lo / 20);
    std::string series;
    for (size_t i = 0; i < rss.size(); i += std::max<size_t>(1, rss.size() / 12)) {
      absl::StrAppend(&series, series.empty() ? "" : " ", rss[i] >> 20);
    }
    std::printf("ps resident memory (MiB, sampled): %s; after %ds warm-up %.1f..%.1f MiB "
                "(growth %.1f MiB, allowed %.1f): %s\n",
                series.c_str(), static_cast<int>(o.warmup_s), lo / 1048576.0, hi / 1048576.0,
                (hi - lo) / 1048576.0, allowed / 1048576.0,
                hi - lo <= allowed ? "flat" : "GROWING");
    if (hi - lo > allowed) ok = false;
  }
  return ok;
}

// The PS daemon: this build's pstrain as ps:0 on `address`.
absl::StatusOr<pid_t> StartPs(const LoadOptions& o, const Securities& security,
                              const HostPort& address, const std::string& scratch) {
  SpawnOptions spawn;
  spawn.argv = {o.pstrain};
  spawn.argv.insert(spawn.argv.end(), security.ps_flags.begin(), security.ps_flags.end());
  spawn.argv.push_back("--max_ids_per_request=4096");
  spawn.env = {{"TF_CONFIG", absl::StrCat(R"({"cluster": {"ps": [")", address.ToString(),
                                          R"("]}, "task": {"type": "ps", "index": 0}})")}};
  spawn.log_path = scratch + "-ps.log";
  return Spawn(spawn);
}

// Creates the variables through `admin` once the PS answers.
absl::Status CreateVariables(const Load& load, client::PsClient& admin) {
  PSTRAIN_RETURN_IF_ERROR(admin.WaitUntilReady(absl::Seconds(30), false));
  client::CreateOptions create;
  create.optimizer = {"sgd", 1.0f};
  create.num_replicas = static_cast<int>(load.options.clients);
  std::vector<float> zeros(load.options.floats, 0.0f);
  return client::PsAdmin(&admin.control())
      .CreateVariables(load.placement, zeros, {0}, create)
      .status();
}

// The options, the securities, the PS's address and the placement.
absl::Status Setup(CliArgs& args, const std::string& scratch, Load* load) {
  PSTRAIN_ASSIGN_OR_RETURN(load->options, ParseOptions(args));
  PSTRAIN_ASSIGN_OR_RETURN(load->security, LoadSecurities(load->options, scratch));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> ports, PickFreePorts(1));
  load->address = HostPort{"127.0.0.1", ports[0]};
  VariableDef emb{"emb", {100000, 8}};
  emb.embedding = true;
  PSTRAIN_ASSIGN_OR_RETURN(load->placement,
                           ComputePlacement({{"w", {load->options.floats}}, emb}, 1));
  load->w_key = load->placement.SlicesOf("w")[0].key();
  return absl::OkStatus();
}

int Run(CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "ps_load: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  Load load;
  const std::string scratch = absl::StrCat("/tmp/ps_load-", ::getpid());
  if (absl::Status s = Setup(args, scratch, &load); !s.ok()) return fail(s);
  const LoadOptions& o = load.options;
  absl::StatusOr<pid_t> started = StartPs(o, load.security, load.address, scratch);
  if (!started.ok()) return fail(started.status());
  const pid_t pid = *started;
  auto stop_ps = [&] { StopChildren({pid}, absl::Seconds(10)); };
  auto admin = load.Client(load.security.good, -1);
  if (!admin.ok()) {
    stop_ps();
    return fail(admin.status());
  }
  if (absl::Status s = CreateVariables(load, **admin); !s.ok()) {
    stop_ps();
    return fail(s);
  }
  std::printf("ps_load: 1 ps (%s, %s), %d clients for %ds, 1 request in %d bad, tensor of "
              "%d floats\n",
              load.address.ToString().c_str(), load.security.good->Describe().c_str(),
              static_cast<int>(o.clients), static_cast<int>(o.seconds),
              static_cast<int>(o.bad_every), static_cast<int>(o.floats));
  Totals totals;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] { ClientLoop(load, c, stop, &totals); });
  }
  // Memory, once a second.
  std::vector<int64_t> rss;
  PsEnd end;
  end.alive = true;
  for (int s = 0; s < o.seconds; ++s) {
    absl::SleepFor(start + absl::Seconds(s + 1) - absl::Now());
    auto stats = (*admin)->Stats();
    if (!stats.ok()) {
      end.alive = false;
      std::printf("ps_load: the ps stopped answering: %s\n",
                  std::string(stats.status().message()).c_str());
      break;
    }
    rss.push_back((*stats)[0].resident_bytes());
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  end.values.resize(o.floats);
  if (end.alive) {
    auto pulled = (*admin)->PullAll(end.values.data(), {0});
    auto stats = (*admin)->Stats();
    if (!pulled.ok() || !stats.ok()) {
      end.alive = false;
    } else {
      end.refused_auth = (*stats)[0].refused_unauthenticated();
      end.refused_limit = (*stats)[0].refused_over_limit();
    }
  }
  const bool ok = Report(o, totals, end, rss, elapsed);
  stop_ps();
  std::printf("ps_load: %s\n", ok ? "ok" : "FAILED");
  ::unlink((scratch + "-token").c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace pstrain::bench

int main(int argc, char** argv) {
  auto args = pstrain::CliArgs::Parse(argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "ps_load: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  return pstrain::bench::Run(*args);
}
