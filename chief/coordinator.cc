#include "chief/coordinator.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "grpcpp/grpcpp.h"

namespace pstrain::chief {

JobTracker::JobTracker(std::vector<HostPort> workers)
    : workers_(std::move(workers)) {}

absl::Status JobTracker::MarkDone(const v1::ReportDoneRequest& report) {
  if (report.task_type() != "worker") {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReportDone from task type \"", report.task_type(),
        "\": only workers report"));
  }
  if (report.task_index() < 0 ||
      report.task_index() >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReportDone from worker:", report.task_index(), ": the cluster has ",
        workers_.size(), " workers"));
  }
  absl::MutexLock lock(&mu_);
  reports_[report.task_index()] = report;
  return absl::OkStatus();
}

absl::Status JobTracker::WaitForAll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const size_t n = workers_.size();
  auto all_done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reports_.size() == n;
  };
  absl::MutexLock lock(&mu_);
  while (true) {
    const absl::Time wake = std::min(deadline, absl::Now() + absl::Seconds(30));
    mu_.AwaitWithDeadline(absl::Condition(&all_done), wake);
    if (all_done()) return absl::OkStatus();
    std::vector<std::string> missing;
    for (size_t i = 0; i < n; ++i) {
      if (reports_.count(i) == 0) {
        missing.push_back(absl::StrCat("worker:", i, " (", workers_[i].ToString(), ")"));
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "after ", absl::FormatDuration(timeout), " still waiting for ",
          absl::StrJoin(missing, ", "), " to finish training"));
    }
    Log(reports_.size(), " of ", n, " workers done; waiting for ",
        absl::StrJoin(missing, ", "));
  }
}

std::map<int, v1::ReportDoneRequest> JobTracker::reports() const {
  absl::MutexLock lock(&mu_);
  return reports_;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::ReportDone(
    grpc::CallbackServerContext* ctx, const v1::ReportDoneRequest* req,
    v1::ReportDoneResponse* resp) {
  absl::Status s = tracker_->MarkDone(*req);
  if (s.ok()) {
    Log("worker:", req->task_index(), " finished: ", req->steps(), " steps, ",
        req->examples(), " examples, loss ", req->final_loss(), ", ",
        static_cast<int64_t>(req->examples_per_sec()), " examples/s");
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

absl::Status ReportDoneToChief(const HostPort& address,
                               const v1::ReportDoneRequest& report,
                               absl::Duration timeout) {
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(
      address.ToString(), grpc::InsecureChannelCredentials()));
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

}  // namespace pstrain::chief
