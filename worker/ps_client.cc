#include "worker/ps_client.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "grpcpp/grpcpp.h"

namespace pstrain::worker {

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    const PsClientOptions& options, const Placement& placement) {
  if (options.ps_addresses.empty()) {
    return absl::InvalidArgumentError("PsClient needs at least one ps address");
  }
  if (placement.num_ps != static_cast<int>(options.ps_addresses.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement is for ", placement.num_ps, " ps but the cluster has ",
        options.ps_addresses.size()));
  }
  return std::unique_ptr<PsClient>(new PsClient(options, placement));
}

PsClient::PsClient(const PsClientOptions& options, const Placement& placement)
    : options_(options), placement_(placement) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  const int n = static_cast<int>(options.ps_addresses.size());
  slices_on_.resize(n);
  pull_requests_.resize(n);
  pull_responses_.resize(n);
  push_requests_.resize(n);
  push_responses_.resize(n);
  for (int i = 0; i < n; ++i) {
    stubs_.push_back(v1::PsService::NewStub(grpc::CreateCustomChannel(
        options.ps_addresses[i].ToString(), grpc::InsecureChannelCredentials(),
        args)));
    slices_on_[i] = placement.SlicesOn(i);
    if (!slices_on_[i].empty()) ps_with_slices_.push_back(i);
    for (const SliceDef& s : slices_on_[i]) {
      pull_requests_[i].add_keys(s.key());
      push_requests_[i].add_keys(s.key());
      push_requests_[i].add_gradients();
    }
  }
  for (size_t v = 0; v < placement.variables.size(); ++v) {
    variable_index_[placement.variables[v].name] = static_cast<int>(v);
  }
}

std::string PsClient::PsName(int ps) const {
  return absl::StrCat("ps:", ps, " (", options_.ps_addresses[ps].ToString(), ")");
}

absl::Status PsClient::CallEach(const std::vector<int>& targets,
                                absl::string_view method, const AsyncCall& call,
                                absl::Duration deadline) {
  std::vector<int> pending = targets;
  absl::Duration backoff = absl::Milliseconds(50);
  for (int attempt = 1; !pending.empty(); ++attempt) {
    const size_t n = pending.size();
    std::vector<grpc::ClientContext> contexts(n);
    std::vector<grpc::Status> results(n);
    absl::Mutex mu;
    size_t done_count = 0;
    bool all_done = false;
    const auto when = std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(deadline);
    for (size_t i = 0; i < n; ++i) {
      contexts[i].set_deadline(when);
      call(pending[i], &contexts[i], [&, i](grpc::Status s) {
        absl::MutexLock lock(&mu);
        results[i] = std::move(s);
        all_done = (++done_count == n);
      });
    }
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&all_done));
    }
    std::vector<int> retry;
    for (size_t i = 0; i < n; ++i) {
      if (results[i].ok()) continue;
      if (results[i].error_code() == grpc::StatusCode::UNAVAILABLE &&
          attempt < options_.max_attempts) {
        retry.push_back(pending[i]);
        continue;
      }
      return FromGrpcStatus(results[i], PsName(pending[i]), method);
    }
    pending = std::move(retry);
    if (!pending.empty()) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::WaitUntilReady(absl::Duration timeout,
                                      bool require_initialized) {
  const absl::Time start = absl::Now();
  absl::Time next_log = start + absl::Seconds(5);
  std::vector<int> missing(num_ps());
  for (int i = 0; i < num_ps(); ++i) missing[i] = i;
  std::vector<std::string> why(num_ps());
  while (true) {
    std::vector<int> still;
    for (int ps : missing) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1::HealthRequest req;
      v1::HealthResponse resp;
      grpc::Status s = stubs_[ps]->Health(&ctx, req, &resp);
      if (!s.ok()) {
        why[ps] = absl::StrCat("not answering (", s.error_message(), ")");
        still.push_back(ps);
      } else if (require_initialized && !resp.initialized()) {
        why[ps] = "variables not initialised yet";
        still.push_back(ps);
      } else if (resp.ps_index() != ps) {
        return absl::FailedPreconditionError(absl::StrCat(
            PsName(ps), " says it is ps:", resp.ps_index(),
            ": the tasks' TF_CONFIG disagree"));
      }
    }
    missing = std::move(still);
    if (missing.empty()) return absl::OkStatus();
    auto names = [&] {
      return absl::StrJoin(missing, "; ", [&](std::string* out, int ps) {
        absl::StrAppend(out, PsName(ps), ": ", why[ps]);
      });
    };
    const absl::Time now = absl::Now();
    if (now - start >= timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          "after waiting ", absl::FormatDuration(timeout), ": ", names()));
    }
    if (now >= next_log) {
      Log("waiting since ", absl::FormatDuration(absl::Trunc(now - start, absl::Seconds(1))),
          " for ", names());
      next_log = now + absl::Seconds(5);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<int> PsClient::CreateVariables(
    const std::vector<float>& params, const std::vector<int64_t>& offsets,
    const OptimizerSpec& optimizer) {
  std::vector<v1::CreateVariablesRequest> reqs(num_ps());
  std::vector<v1::CreateVariablesResponse> resps(num_ps());
  std::vector<int> all;
  for (int ps = 0; ps < num_ps(); ++ps) {
    all.push_back(ps);
    v1::CreateVariablesRequest& req = reqs[ps];
    req.set_ps_index(ps);
    req.set_num_ps(num_ps());
    v1::OptimizerConfig* o = req.mutable_optimizer();
    o->set_name(optimizer.name);
    o->set_learning_rate(optimizer.learning_rate);
    o->set_momentum(optimizer.momentum);
    o->set_nesterov(optimizer.nesterov);
    o->set_initial_accumulator(optimizer.initial_accumulator);
    o->set_beta1(optimizer.beta1);
    o->set_beta2(optimizer.beta2);
    o->set_epsilon(optimizer.epsilon);
    for (const SliceDef& s : slices_on_[ps]) {
      const VariableDef& var = placement_.variables[variable_index_.at(s.variable)];
      v1::SliceSpec* spec = req.add_slices();
      spec->set_variable(s.variable);
      spec->set_slice_index(s.slice_index);
      spec->set_num_slices(s.num_slices);
      spec->set_row_begin(s.row_begin);
      spec->set_row_end(s.row_end);
      for (int64_t d : var.shape) spec->add_shape(d);
      const float* src = params.data() + offsets[variable_index_.at(s.variable)] +
                         s.element_offset();
      req.add_initial_values(reinterpret_cast<const char*>(src), s.bytes());
    }
  }
  absl::Status s = CallEach(
      all, "CreateVariables",
      [&](int ps, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stubs_[ps]->async()->CreateVariables(ctx, &reqs[ps], &resps[ps], std::move(done));
      },
      options_.rpc_deadline);
  if (!s.ok()) return s;
  int kept = 0;
  for (const auto& r : resps) kept += r.already_initialized() ? 1 : 0;
  return kept;
}

absl::StatusOr<int64_t> PsClient::PullAll(float* params,
                                          const std::vector<int64_t>& offsets) {
  absl::Status s = CallEach(
      ps_with_slices_, "Pull",
      [&](int ps, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        pull_responses_[ps].Clear();
        stubs_[ps]->async()->Pull(ctx, &pull_requests_[ps], &pull_responses_[ps],
                                  std::move(done));
      },
      options_.rpc_deadline);
  if (!s.ok()) return s;
  int64_t step = 0;
  for (int ps : ps_with_slices_) {
    const v1::PullResponse& resp = pull_responses_[ps];
    if (resp.values_size() != static_cast<int>(slices_on_[ps].size())) {
      return absl::InternalError(absl::StrCat(
          PsName(ps), ": Pull returned ", resp.values_size(), " values for ",
          slices_on_[ps].size(), " slices"));
    }
    for (size_t i = 0; i < slices_on_[ps].size(); ++i) {
      const SliceDef& sl = slices_on_[ps][i];
      const std::string& bytes = resp.values(i);
      if (static_cast<int64_t>(bytes.size()) != sl.bytes()) {
        return absl::InternalError(absl::StrCat(
            PsName(ps), ": Pull of ", sl.key(), " returned ", bytes.size(),
            " bytes, expected ", sl.bytes()));
      }
      std::memcpy(params + offsets[variable_index_.at(sl.variable)] + sl.element_offset(),
                  bytes.data(), bytes.size());
    }
    step = std::max(step, resp.global_step());
  }
  return step;
}

absl::Status PsClient::PushAll(const float* grads,
                               const std::vector<int64_t>& offsets, int replica,
                               int64_t step) {
  for (int ps : ps_with_slices_) {
    v1::PushRequest& req = push_requests_[ps];
    req.set_replica(replica);
    req.set_step(step);
    for (size_t i = 0; i < slices_on_[ps].size(); ++i) {
      const SliceDef& sl = slices_on_[ps][i];
      const float* src = grads + offsets[variable_index_.at(sl.variable)] + sl.element_offset();
      // assign() reuses the string's capacity from the previous step.
      req.mutable_gradients(i)->assign(reinterpret_cast<const char*>(src), sl.bytes());
    }
  }
  return CallEach(
      ps_with_slices_, "Push",
      [&](int ps, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stubs_[ps]->async()->Push(ctx, &push_requests_[ps], &push_responses_[ps],
                                  std::move(done));
      },
      options_.rpc_deadline);
}

absl::StatusOr<std::vector<v1::StatsResponse>> PsClient::Stats() {
  std::vector<v1::StatsRequest> reqs(num_ps());
  std::vector<v1::StatsResponse> resps(num_ps());
  std::vector<int> all;
  for (int i = 0; i < num_ps(); ++i) all.push_back(i);
  absl::Status s = CallEach(
      all, "Stats",
      [&](int ps, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stubs_[ps]->async()->Stats(ctx, &reqs[ps], &resps[ps], std::move(done));
      },
      options_.rpc_deadline);
  if (!s.ok()) return s;
  return resps;
}

absl::Status PsClient::ShutdownAll(const std::string& reason) {
  std::vector<v1::ShutdownRequest> reqs(num_ps());
  std::vector<v1::ShutdownResponse> resps(num_ps());
  std::vector<grpc::Status> results(num_ps());
  std::vector<std::string> failures;
  for (int ps = 0; ps < num_ps(); ++ps) {
    reqs[ps].set_reason(reason);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = stubs_[ps]->Shutdown(&ctx, reqs[ps], &resps[ps]);
    // A PS that is already gone has nothing left to stop.
    if (!s.ok() && s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      failures.push_back(FromGrpcStatus(s, PsName(ps), "Shutdown").ToString());
    }
  }
  if (!failures.empty()) {
    return absl::UnknownError(absl::StrJoin(failures, "; "));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
