#include "client/ps_admin.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>

#include "cluster/global_step.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace pstrain::client {

std::vector<int> PsAdmin::AllPs() const {
  std::vector<int> all(num_ps());
  for (int ps = 0; ps < num_ps(); ++ps) all[ps] = ps;
  return all;
}

absl::Status PsAdmin::OnEach(absl::Span<const int> targets, absl::Duration timeout,
                             const std::function<absl::Status(int, absl::Time)>& call) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> pending(targets.begin(), targets.end());
  absl::Duration backoff = absl::Milliseconds(50);
  while (!pending.empty()) {
    std::vector<absl::Status> results(pending.size());
    {
      // The first PS on this thread, the others on threads of their own.
      std::vector<std::thread> threads;
      for (size_t i = 1; i < pending.size(); ++i) {
        threads.emplace_back([&, i] { results[i] = call(pending[i], deadline); });
      }
      results[0] = call(pending[0], deadline);
      for (std::thread& t : threads) t.join();
    }
    std::vector<int> retry;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (results[i].ok()) continue;
      if (results[i].code() == absl::StatusCode::kUnavailable &&
          absl::Now() + backoff < deadline) {
        retry.push_back(pending[i]);
        continue;
      }
      return results[i];
    }
    pending = std::move(retry);
    if (!pending.empty()) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::HealthResponse> PsAdmin::Health(int ps, absl::Duration timeout,
                                                   bool wait_for_connection) {
  return channel_->Health(ps, absl::Now() + timeout, wait_for_connection);
}

absl::Status PsAdmin::WaitUntilAnswering(absl::Duration timeout,
                                         const std::function<absl::Status()>& abort_check) {
  return WaitForPs(*channel_, timeout, /*require_initialized=*/false, abort_check).status();
}

absl::StatusOr<int> PsAdmin::CreateVariables(const Placement& placement,
                                             const std::vector<float>& params,
                                             const std::vector<int64_t>& offsets,
                                             const CreateOptions& create,
                                             std::vector<int>* kept_ps) {
  std::vector<v1::CreateVariablesRequest> reqs(num_ps());
  std::vector<v1::CreateVariablesResponse> resps(num_ps());
  for (int ps = 0; ps < num_ps(); ++ps) {
    reqs[ps] = CreateRequestFor(placement, ps, params, offsets, create);
  }
  // Reading a GiB-sized checkpoint shard takes far longer than a call.
  const absl::Duration timeout =
      create.restore_step >= 0 ? std::max(kCallDeadline, absl::Minutes(10)) : kCallDeadline;
  PSTRAIN_RETURN_IF_ERROR(OnEach(AllPs(), timeout, [&](int ps, absl::Time deadline) {
    PSTRAIN_ASSIGN_OR_RETURN(resps[ps], channel_->CreateVariables(ps, reqs[ps], deadline));
    return absl::OkStatus();
  }));
  int kept = 0;
  if (kept_ps != nullptr) kept_ps->clear();
  for (int ps = 0; ps < num_ps(); ++ps) {
    if (!resps[ps].already_initialized()) continue;
    ++kept;
    if (kept_ps != nullptr) kept_ps->push_back(ps);
  }
  return kept;
}

absl::StatusOr<std::vector<v1::StatsResponse>> PsAdmin::Stats() {
  std::vector<v1::StatsResponse> resps(num_ps());
  PSTRAIN_RETURN_IF_ERROR(OnEach(AllPs(), kCallDeadline, [&](int ps, absl::Time deadline) {
    PSTRAIN_ASSIGN_OR_RETURN(resps[ps], channel_->Stats(ps, deadline));
    return absl::OkStatus();
  }));
  return resps;
}

absl::StatusOr<int64_t> PsAdmin::ReplicaPushes(const Placement& placement, int replica) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, Stats());
  return ReplicaPushesIn(stats, placement, replica, *channel_);
}

absl::StatusOr<int64_t> PsAdmin::GlobalStep() {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, Stats());
  int64_t step = kNoStep;
  for (const v1::StatsResponse& s : stats) step = SlowerStep(step, s.global_step());
  return step;
}

absl::StatusOr<int64_t> PsAdmin::HoldPushes(absl::Duration lease) {
  const int64_t lease_ms = absl::ToInt64Milliseconds(lease);
  if (lease_ms <= 0 || lease_ms > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a push hold needs a lease of 1 ms or more, got ", absl::FormatDuration(lease)));
  }
  v1::HoldPushesRequest req;
  req.set_lease_ms(static_cast<int32_t>(lease_ms));
  std::vector<v1::HoldPushesResponse> resps(num_ps());
  absl::Status held = OnEach(AllPs(), lease, [&](int ps, absl::Time deadline) {
    PSTRAIN_ASSIGN_OR_RETURN(resps[ps], channel_->HoldPushes(ps, req, deadline));
    return absl::OkStatus();
  });
  if (!held.ok()) {
    ReleasePushes().IgnoreError();  // best effort: the leases end them anyway
    return held;
  }
  int64_t step = kNoStep;
  for (const v1::HoldPushesResponse& r : resps) step = SlowerStep(step, r.global_step());
  return step;
}

absl::Status PsAdmin::ReleasePushes() {
  const v1::HoldPushesRequest release;  // a lease of 0 ms
  return OnEach(AllPs(), kCallDeadline, [&](int ps, absl::Time deadline) {
    return channel_->HoldPushes(ps, release, deadline).status();
  });
}

absl::StatusOr<std::vector<v1::SaveCheckpointResponse>> PsAdmin::SaveCheckpoint(
    const std::string& dir, int64_t step, absl::Duration timeout, bool release_hold) {
  v1::SaveCheckpointRequest req;
  req.set_dir(dir);
  req.set_step(step);
  req.set_release_hold(release_hold);
  std::vector<v1::SaveCheckpointResponse> resps(num_ps());
  PSTRAIN_RETURN_IF_ERROR(OnEach(AllPs(), timeout, [&](int ps, absl::Time deadline) {
    PSTRAIN_ASSIGN_OR_RETURN(resps[ps], channel_->SaveCheckpoint(ps, req, deadline));
    return absl::OkStatus();
  }));
  return resps;
}

absl::StatusOr<std::vector<v1::RestoreResponse>> PsAdmin::Restore(const std::vector<int>& targets,
                                                                  const std::string& dir,
                                                                  int64_t step, int written_by,
                                                                  int64_t generation,
                                                                  absl::Duration timeout) {
  v1::RestoreRequest req;
  v1::CheckpointRef* ref = req.mutable_checkpoint();
  ref->set_dir(dir);
  ref->set_step(step);
  ref->set_num_ps(written_by);
  req.set_generation(generation);
  std::vector<v1::RestoreResponse> resps(num_ps());
  PSTRAIN_RETURN_IF_ERROR(OnEach(targets, timeout, [&](int ps, absl::Time deadline) {
    PSTRAIN_ASSIGN_OR_RETURN(resps[ps], channel_->Restore(ps, req, deadline));
    return absl::OkStatus();
  }));
  return resps;
}

absl::Status PsAdmin::ShutdownAll(const std::string& reason, int exit_code,
                                  absl::Duration wait_for_unreachable) {
  v1::ShutdownRequest req;
  req.set_reason(reason);
  req.set_exit_code(exit_code);
  std::vector<int> pending = AllPs();
  std::vector<std::string> failures;
  const absl::Time deadline = absl::Now() + wait_for_unreachable;
  bool said = false;
  while (true) {
    std::vector<int> unreachable;
    for (int ps : pending) {
      absl::Status s = channel_->Shutdown(ps, req, absl::Now() + absl::Seconds(5));
      if (s.code() == absl::StatusCode::kUnavailable) {
        unreachable.push_back(ps);
      } else if (!s.ok()) {
        failures.push_back(s.ToString());
      }
    }
    pending = std::move(unreachable);
    if (pending.empty() || absl::Now() >= deadline) break;
    if (!said) {
      std::vector<std::string> names;
      for (int ps : pending) names.push_back(PsName(ps));
      Log("stopping the ps: ", absl::StrJoin(names, ", "), " not answering; trying for up to ",
          absl::FormatDuration(wait_for_unreachable));
      said = true;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  // A PS that is already gone has nothing left to stop.
  if (!pending.empty() && wait_for_unreachable > absl::ZeroDuration()) {
    std::vector<std::string> names;
    for (int ps : pending) names.push_back(PsName(ps));
    Log("stopping the ps: ", absl::StrJoin(names, ", "), " never answered; taken to be gone");
  }
  if (!failures.empty()) return absl::UnknownError(absl::StrJoin(failures, "; "));
  return absl::OkStatus();
}

}  // namespace pstrain::client
