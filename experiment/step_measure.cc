#include "experiment/step_measure.h"

#include <signal.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "base/subprocess.h"
#include "client/create_request.h"
#include "client/ps_admin.h"
#include "client/ps_client.h"
#include "cluster/placement.h"
#include "cluster/tf_config.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "transport/ring.h"

namespace pstrain::experiment {
namespace {

// PS processes of this binary on loopback, ended when this goes.
struct LocalPs {
  std::vector<pid_t> pids;
  std::vector<HostPort> addresses;
  ~LocalPs() {
    for (pid_t pid : pids) SignalChild(pid, SIGKILL);
    for (pid_t pid : pids) WaitChild(pid, absl::Seconds(10));
  }
};

absl::StatusOr<std::unique_ptr<LocalPs>> StartPs(const std::string& self_path, int num_ps) {
  auto ps = std::make_unique<LocalPs>();
  auto ports = PickFreePorts(num_ps + 1);
  if (!ports.ok()) return ports.status();
  TfConfig cfg;
  for (int i = 0; i < num_ps; ++i) cfg.cluster.ps.push_back({"127.0.0.1", (*ports)[i]});
  cfg.cluster.worker.push_back({"127.0.0.1", (*ports)[num_ps]});
  for (int i = 0; i < num_ps; ++i) {
    cfg.task = {Role::kPs, i};
    SpawnOptions spawn;
    spawn.argv = {self_path};
    spawn.env = {{"TF_CONFIG", cfg.ToJson()}};
    spawn.log_path = "/dev/null";
    auto pid = Spawn(spawn);
    if (!pid.ok()) return pid.status();
    ps->pids.push_back(*pid);
  }
  ps->addresses = cfg.cluster.ps;
  return ps;
}

}  // namespace

absl::StatusOr<double> MeasureStep(const std::string& pstrain_path, double model_bytes, int workers,
                                   int num_ps, absl::Duration duration) {
  const int64_t cols = 256;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(model_bytes / 4 / cols));
  VariableDef model{"model", {rows, cols}};
  model.initializer = "zeros";
  auto placement = ComputePlacement({model}, num_ps);
  if (!placement.ok()) return placement.status();
  auto ps = StartPs(pstrain_path, num_ps);
  if (!ps.ok()) return ps.status();
  std::vector<std::unique_ptr<client::PsClient>> clients;
  for (int w = 0; w < workers; ++w) {
    client::PsClientOptions o;
    o.ps_addresses = (*ps)->addresses;
    o.replica = w;
    auto client = client::PsClient::Create(o, *placement);
    if (!client.ok()) return client.status();
    clients.push_back(*std::move(client));
  }
  if (absl::Status s = clients[0]->WaitUntilReady(absl::Seconds(30), false); !s.ok()) return s;
  client::CreateOptions create;
  create.optimizer = {"sgd", 1e-6f};
  create.num_replicas = workers;
  const std::vector<int64_t> offsets = {0};
  client::PsAdmin admin(&clients[0]->control());
  if (auto c = admin.CreateVariables(*placement, {}, offsets, create); !c.ok()) return c.status();
  for (auto& c : clients) {
    if (absl::Status s = c->WaitUntilReady(absl::Seconds(30), true); !s.ok()) return s;
  }
  const size_t floats = static_cast<size_t>(rows * cols);
  std::vector<double> step_s(workers);
  std::vector<absl::Status> errors(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> grads(floats, 1e-3f), params(floats);
      // One warm-up round, then as many as fit in `duration`.
      if (auto r = clients[w]->PushPullAll(grads.data(), params.data(), offsets); !r.ok()) {
        errors[w] = r.status();
        return;
      }
      const absl::Time start = absl::Now();
      int steps = 0;
      while (absl::Now() - start < duration) {
        if (auto r = clients[w]->PushPullAll(grads.data(), params.data(), offsets); !r.ok()) {
          errors[w] = r.status();
          return;
        }
        ++steps;
      }
      step_s[w] = absl::ToDoubleSeconds(absl::Now() - start) / std::max(steps, 1);
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  double mean = 0;
  for (double s : step_s) mean += s / workers;
  return mean;
}

absl::StatusOr<double> MeasureAllReduceStep(double model_bytes, int workers,
                                            absl::Duration duration) {
  if (workers <= 1) return 0.0;
  auto ports = PickFreePorts(workers);
  if (!ports.ok()) return ports.status();
  std::vector<RingMember> members;
  for (int w = 0; w < workers; ++w) {
    members.push_back({absl::StrCat("worker:", w), "127.0.0.1", (*ports)[w]});
  }
  const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(model_bytes / 4));
  std::vector<absl::Status> status(workers);
  std::vector<double> seconds(workers, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      RingOptions options;
      options.members = members;
      options.rank = w;
      options.job_key = "plan --measure";
      options.shared_memory = false;
      options.connect_timeout = absl::Seconds(30);
      auto ring = Ring::Form(options);
      if (!ring.ok()) {
        status[w] = ring.status();
        return;
      }
      // The sums grow to inf after some rounds; adding infs takes as long.
      std::vector<float> data(count, 1.0f);
      absl::Time start = absl::Now();
      if (status[w] = (*ring)->AllReduceSum(absl::MakeSpan(data)); !status[w].ok()) return;
      // Member 0's warm-up time decides how many fill `duration`; all run that many.
      const double one = std::max(1e-6, absl::ToDoubleSeconds(absl::Now() - start));
      auto agreed = (*ring)->AllGather(
          absl::StrCat(std::max<int64_t>(1, absl::ToDoubleSeconds(duration) / one)));
      int64_t iterations = 1;
      if (!agreed.ok() || !absl::SimpleAtoi((*agreed)[0], &iterations)) {
        status[w] = agreed.ok() ? absl::InternalError("members disagree on the rounds")
                                : agreed.status();
        return;
      }
      start = absl::Now();
      for (int64_t i = 0; i < iterations; ++i) {
        if (status[w] = (*ring)->AllReduceSum(absl::MakeSpan(data)); !status[w].ok()) return;
      }
      seconds[w] = absl::ToDoubleSeconds(absl::Now() - start) / iterations;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return *std::max_element(seconds.begin(), seconds.end());
}

}  // namespace pstrain::experiment
