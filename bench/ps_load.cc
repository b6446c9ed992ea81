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
#include "base/median.h"
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

int Run(CliArgs& args) {
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "ps_load: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  std::string self_dir = "bazel-bin/bench";
  {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0) self_dir = std::string(buf, n).substr(0, std::string(buf, n).rfind('/'));
  }
  auto pstrain = args.GetString("pstrain", self_dir + "/../pstrain");
  auto clients = args.GetInt("clients", 32);
  auto seconds = args.GetInt("seconds", 60);
  auto bad_every = args.GetInt("bad_every", 4);
  auto floats = args.GetInt("floats", 1024);
  auto certs = args.GetString("certs", "");
  auto warmup = args.GetInt("warmup_s", 10);
  for (const absl::Status& s : {pstrain.status(), clients.status(), seconds.status(),
                                bad_every.status(), floats.status(), certs.status(),
                                warmup.status(), args.CheckAllUsed()}) {
    if (!s.ok()) return fail(s);
  }
  if (*clients < 1 || *clients > 1024 || *seconds < 1 || *bad_every < 1 || *floats < 1 ||
      *floats > (1 << 24) || *warmup < 0 || *warmup >= *seconds) {
    return fail(absl::InvalidArgumentError(
        "--clients in 1..1024, --seconds >= 1, --bad_every >= 1, --floats in 1..16M, "
        "0 <= --warmup_s < --seconds"));
  }

  // Security: the job's, and the wrong kinds.
  SecurityConfig good_config;
  std::vector<std::string> ps_flags;
  const std::string scratch = absl::StrCat("/tmp/ps_load-", ::getpid());
  std::string token_path = scratch + "-token";
  if (!certs->empty()) {
    good_config.tls_cert = *certs + "/cert.pem";
    good_config.tls_key = *certs + "/key.pem";
    good_config.tls_ca = *certs + "/ca.pem";
    token_path = *certs + "/token";
    ps_flags = {"--tls_cert=" + good_config.tls_cert, "--tls_key=" + good_config.tls_key,
                "--tls_ca=" + good_config.tls_ca};
  } else {
    std::random_device rd;
    std::ofstream(token_path) << absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  }
  good_config.token_file = token_path;
  ps_flags.push_back("--token_file=" + token_path);
  auto good = Security::Load(good_config);
  if (!good.ok()) return fail(good.status());
  SecurityConfig wrong_config = good_config;
  wrong_config.token_file.clear();
  wrong_config.token = "this-is-not-the-cluster-token";
  SecurityConfig none_config = good_config;
  none_config.token_file.clear();
  auto wrong = Security::Load(wrong_config);
  auto none = Security::Load(none_config);
  if (!wrong.ok() || !none.ok()) return fail(absl::InternalError("cannot load the bad configs"));

  // The PS: the real daemon.
  auto ports = PickFreePorts(1);
  if (!ports.ok()) return fail(ports.status());
  const HostPort address{"127.0.0.1", (*ports)[0]};
  SpawnOptions spawn;
  spawn.argv = {*pstrain};
  spawn.argv.insert(spawn.argv.end(), ps_flags.begin(), ps_flags.end());
  spawn.argv.push_back("--max_ids_per_request=4096");
  spawn.env = {{"TF_CONFIG", absl::StrCat(R"({"cluster": {"ps": [")", address.ToString(),
                                          R"("]}, "task": {"type": "ps", "index": 0}})")}};
  spawn.log_path = scratch + "-ps.log";
  auto pid = Spawn(spawn);
  if (!pid.ok()) return fail(pid.status());
  auto stop_ps = [&] { StopChildren({*pid}, absl::Seconds(10)); };

  VariableDef emb{"emb", {100000, 8}};
  emb.embedding = true;
  auto placement = ComputePlacement({{"w", {*floats}}, emb}, 1);
  if (!placement.ok()) return fail(placement.status());
  const std::string w_key = placement->SlicesOf("w")[0].key();
  auto make_client = [&](std::shared_ptr<const Security> security, int replica) {
    client::PsClientOptions o;
    o.ps_addresses = {address};
    o.replica = replica;
    o.rpc_deadline = absl::Seconds(30);
    o.security = std::move(security);
    return client::PsClient::Create(o, *placement);
  };
  auto admin = make_client(*good, -1);
  if (!admin.ok()) return fail(admin.status());
  if (absl::Status s = (*admin)->WaitUntilReady(absl::Seconds(30), false); !s.ok()) {
    stop_ps();
    return fail(s);
  }
  client::CreateOptions create;
  create.optimizer = {"sgd", 1.0f};
  create.num_replicas = static_cast<int>(*clients);
  std::vector<float> zeros(*floats, 0.0f);
  if (auto c = client::PsAdmin(&(*admin)->control()).CreateVariables(*placement, zeros, {0}, create);
      !c.ok()) {
    stop_ps();
    return fail(c.status());
  }
  std::printf("ps_load: 1 ps (%s, %s), %d clients for %ds, 1 request in %d bad, tensor of "
              "%d floats\n",
              address.ToString().c_str(), (*good)->Describe().c_str(),
              static_cast<int>(*clients), static_cast<int>(*seconds),
              static_cast<int>(*bad_every), static_cast<int>(*floats));

  Totals totals;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int c = 0; c < *clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = make_client(*good, c);
      auto wrong_client = make_client(*wrong, c);
      auto none_client = make_client(*none, c);
      if (!client.ok() || !wrong_client.ok() || !none_client.ok()) return;
      grpc::ChannelArguments channel_args;
      channel_args.SetInt("pstrain.load_client", c);
      client::PsStream raw((*good)->CreateChannel(address.ToString(), channel_args), "ps:0");
      std::vector<float> grad(*floats, 1.0f), params(*floats);
      std::vector<double> latency;
      int64_t pushes = 0, good_failed = 0;
      int64_t sent[kBadKinds] = {}, refused[kBadKinds] = {};
      std::string first_error;
      for (int64_t i = c; !stop.load(std::memory_order_relaxed); ++i) {
        if (i % *bad_every == *bad_every - 1) {
          const int kind = static_cast<int>((i / *bad_every) % kBadKinds);
          ++sent[kind];
          absl::Status s;
          v1::FrameHeader h;
          v1::TensorRef* r = h.add_push();
          r->set_key(w_key);
          std::string payload(*floats * 4, '\0');
          switch (kind) {
            case kWrongToken:
              s = (*wrong_client)->PushAll(grad.data(), {0});
              break;
            case kNoToken:
              s = (*none_client)->PushAll(grad.data(), {0});
              break;
            case kShortPayload:
              payload.resize(12);
              break;
            case kNan: {
              const float nan = std::nanf("");
              std::memcpy(&payload[4 * (i % *floats)], &nan, 4);
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
          if (!s.ok()) ++refused[kind];
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
      absl::MutexLock lock(&totals.mu);
      totals.latency_ms.insert(totals.latency_ms.end(), latency.begin(), latency.end());
      totals.pushes += pushes;
      totals.good_failed += good_failed;
      for (int k = 0; k < kBadKinds; ++k) {
        totals.bad_sent[k] += sent[k];
        totals.bad_refused[k] += refused[k];
      }
      if (totals.first_error.empty()) totals.first_error = first_error;
    });
  }
  // Memory, once a second.
  std::vector<int64_t> rss;
  bool ps_alive = true;
  for (int s = 0; s < *seconds; ++s) {
    absl::SleepFor(start + absl::Seconds(s + 1) - absl::Now());
    auto stats = (*admin)->Stats();
    if (!stats.ok()) {
      ps_alive = false;
      std::printf("ps_load: the ps stopped answering: %s\n",
                  std::string(stats.status().message()).c_str());
      break;
    }
    rss.push_back((*stats)[0].resident_bytes());
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);

  bool ok = ps_alive;
  std::vector<float> final_values(*floats);
  int64_t refused_auth = 0, refused_limit = 0;
  if (ps_alive) {
    auto pulled = (*admin)->PullAll(final_values.data(), {0});
    auto stats = (*admin)->Stats();
    if (!pulled.ok() || !stats.ok()) {
      ok = false;
    } else {
      refused_auth = (*stats)[0].refused_unauthenticated();
      refused_limit = (*stats)[0].refused_over_limit();
    }
  }
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
              totals.pushes * *floats * 4.0 / elapsed / 1e6,
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
              static_cast<long long>(refused_auth), static_cast<long long>(refused_limit));
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
  if (ps_alive) {
    const float want = -static_cast<float>(totals.pushes);
    int64_t wrong_elements = 0;
    for (float v : final_values) wrong_elements += v != want;
    std::printf("sum check: every element is %.0f after %lld acknowledged pushes: %s\n",
                final_values[0], static_cast<long long>(totals.pushes),
                wrong_elements == 0 ? "no update lost" : "MISMATCH");
    if (wrong_elements != 0) ok = false;
  }
  if (rss.size() > static_cast<size_t>(*warmup)) {
    const auto after = std::vector<int64_t>(rss.begin() + *warmup, rss.end());
    const int64_t lo = *std::min_element(after.begin(), after.end());
    const int64_t hi = *std::max_element(after.begin(), after.end());
    const int64_t allowed = std::max<int64_t>(16 << 20, lo / 20);
    std::string series;
    for (size_t i = 0; i < rss.size(); i += std::max<size_t>(1, rss.size() / 12)) {
      absl::StrAppend(&series, series.empty() ? "" : " ", rss[i] >> 20);
    }
    std::printf("ps resident memory (MiB, sampled): %s; after %ds warm-up %.1f..%.1f MiB "
                "(growth %.1f MiB, allowed %.1f): %s\n",
                series.c_str(), static_cast<int>(*warmup), lo / 1048576.0, hi / 1048576.0,
                (hi - lo) / 1048576.0, allowed / 1048576.0,
                hi - lo <= allowed ? "flat" : "GROWING");
    if (hi - lo > allowed) ok = false;
  }
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
