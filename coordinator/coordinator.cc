#include "coordinator/coordinator.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "grpcpp/grpcpp.h"

namespace pstrain::coordinator {

JobTracker::JobTracker(const ClusterSpec& cluster, bool chief_trains)
    : cluster_(cluster), replicas_(TrainingReplicas(cluster, chief_trains)) {}

std::string JobTracker::Describe(int replica) const {
  const TaskId& id = replicas_[replica];
  return absl::StrCat(id.ToString(), " (", cluster_.Address(id.role, id.index).ToString(), ")");
}

absl::Status JobTracker::MarkDone(const v1::ReportDoneRequest& report) {
  int replica = -1;
  for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
    if (RoleName(replicas_[r].role) == report.task_type() &&
        replicas_[r].index == report.task_index()) {
      replica = r;
    }
  }
  if (replica < 0) {
    std::vector<std::string> names;
    for (const TaskId& id : replicas_) names.push_back(id.ToString());
    return absl::InvalidArgumentError(absl::StrCat(
        "ReportDone from ", report.task_type(), ":", report.task_index(),
        ": not one of the job's ", replicas_.size(), " training replicas (",
        absl::StrJoin(names, ", "), ")"));
  }
  absl::MutexLock lock(&mu_);
  reports_[replica] = report;
  return absl::OkStatus();
}

absl::Status JobTracker::WaitForAll(absl::Duration timeout, int enough,
                                    absl::Duration grace) {
  const absl::Time deadline = absl::Now() + timeout;
  const size_t n = replicas_.size();
  const size_t need = enough > 0 && static_cast<size_t>(enough) < n ? enough : n;
  absl::Time enough_since = absl::InfiniteFuture();
  auto all_done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reports_.size() == n || !failed_.ok();
  };
  // Also wakes the first time `need` replicas have reported.
  auto wake_up = [this, n, need, &enough_since]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reports_.size() == n || !failed_.ok() ||
           (reports_.size() >= need && enough_since == absl::InfiniteFuture());
  };
  auto missing = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> names;
    for (size_t r = 0; r < n; ++r) {
      if (reports_.count(r) == 0) names.push_back(Describe(r));
    }
    return absl::StrJoin(names, ", ");
  };
  absl::MutexLock lock(&mu_);
  while (true) {
    const absl::Time wake =
        std::min({deadline, absl::Now() + absl::Seconds(30), enough_since + grace});
    mu_.AwaitWithDeadline(absl::Condition(&wake_up), wake);
    if (!failed_.ok()) return failed_;
    if (all_done()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (reports_.size() >= need && enough_since == absl::InfiniteFuture()) {
      enough_since = now;
      Log(reports_.size(), " of ", n, " replicas done, enough for every step; waiting up to ",
          absl::FormatDuration(grace), " for ", missing());
      continue;
    }
    if (now >= enough_since + grace) {
      Log("ending the job without ", missing(), ": lost or still running past the last step");
      return absl::OkStatus();
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "after ", absl::FormatDuration(timeout), " still waiting for ", missing(),
          " to finish training"));
    }
    Log(reports_.size(), " of ", n, " replicas done; waiting for ", missing());
  }
}

void JobTracker::Fail(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = std::move(why);
}

std::map<int, v1::ReportDoneRequest> JobTracker::reports() const {
  absl::MutexLock lock(&mu_);
  return reports_;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::ReportDone(
    grpc::CallbackServerContext* ctx, const v1::ReportDoneRequest* req,
    v1::ReportDoneResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "ReportDone");
  absl::Status s = admitted.ok() ? tracker_->MarkDone(*req) : admitted.status();
  if (s.ok()) {
    Log(req->task_type(), ":", req->task_index(), " finished: ", req->steps(), " steps, ",
        req->examples(), " examples, loss ", req->final_loss(), ", ",
        static_cast<int64_t>(req->examples_per_sec()), " examples/s");
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

absl::Status ReportDoneToChief(const HostPort& address,
                               const v1::ReportDoneRequest& report,
                               absl::Duration timeout,
                               const Security& security) {
  auto stub = v1::Coordinator::NewStub(
      security.CreateChannel(address.ToString(), grpc::ChannelArguments()));
  const std::string peer = absl::StrCat("chief (", address.ToString(), ")");
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportDoneResponse resp;
    grpc::Status s = stub->ReportDone(&ctx, report, &resp);
    if (s.ok()) return absl::OkStatus();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() + backoff > deadline) {
      return FromGrpcStatus(s, peer, "ReportDone");
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace pstrain::coordinator
