#include "coordinator/coordinator.h"

#include <chrono>
#include <filesystem>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "transport/grpc_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "job/chief_client.h"
#include "grpcpp/grpcpp.h"

namespace pstrain::coordinator {

JobTracker::JobTracker(const ClusterSpec& cluster, bool chief_trains)
    : cluster_(cluster), replicas_(TrainingReplicas(cluster, chief_trains)) {}

std::string JobTracker::Describe(int replica) const {
  const TaskId& id = replicas_[replica];
  return absl::StrCat(id.ToString(), " (", cluster_.Address(id.role, id.index).ToString(), ")");
}

absl::StatusOr<int> JobTracker::ReplicaOf(const std::string& type, int index,
                                          absl::string_view what) const {
  for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
    if (RoleName(replicas_[r].role) == type && replicas_[r].index == index) return r;
  }
  std::vector<std::string> names;
  for (const TaskId& id : replicas_) names.push_back(id.ToString());
  return absl::InvalidArgumentError(
      absl::StrCat(what, " from ", type, ":", index, ": not one of the job's ", replicas_.size(),
                   " training replicas (", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<int> JobTracker::KeepReportsIn(const std::string& dir, absl::Duration rejoin_grace) {
  const std::string done = dir + "/done";
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(done));
  std::error_code ec;
  std::map<int, v1::ReportDoneRequest> read;
  for (const auto& entry : std::filesystem::directory_iterator(done, ec)) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".tmp")) continue;  // a write cut short, never acknowledged
    PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    v1::ReportDoneRequest report;
    if (!report.ParseFromString(text)) {
      return absl::DataLossError(absl::StrCat("done report ", path, " does not parse"));
    }
    auto replica = ReplicaOf(report.task_type(), report.task_index(), "ReportDone");
    if (!replica.ok() || name != absl::StrCat(report.task_type(), "-", report.task_index())) {
      return absl::DataLossError(absl::StrCat(
          "done report ", path, " is not one of this job's training replicas (",
          replica.ok() ? "its name says another task" : replica.status().message(), ")"));
    }
    read[*replica] = std::move(report);
  }
  if (ec) return FileError("listing done reports in", done);
  absl::MutexLock lock(&mu_);
  done_dir_ = done;
  generation_known_ = false;
  stale_counts_from_ = absl::Now() + rejoin_grace;
  for (auto& [replica, report] : read) reports_[replica] = std::move(report);
  return static_cast<int>(read.size());
}

void JobTracker::SetGeneration(int64_t generation) {
  absl::MutexLock lock(&mu_);
  generation_ = generation;
  generation_known_ = true;
}

int64_t JobTracker::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void JobTracker::SetFinished() {
  absl::MutexLock lock(&mu_);
  finished_ = true;
  generation_known_ = true;
}

absl::Status JobTracker::MarkDone(const v1::ReportDoneRequest& report) {
  PSTRAIN_ASSIGN_OR_RETURN(const int replica,
                           ReplicaOf(report.task_type(), report.task_index(), "ReportDone"));
  absl::MutexLock lock(&mu_);
  if (!generation_known_) return absl::UnavailableError("the chief is still starting");
  v1::ReportDoneRequest stamped = report;
  stamped.set_generation(generation_);
  if (!done_dir_.empty()) {
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(
        absl::StrCat(done_dir_, "/", report.task_type(), "-", report.task_index()),
        stamped.SerializeAsString()));
  }
  reports_[replica] = std::move(stamped);
  return absl::OkStatus();
}

absl::StatusOr<bool> JobTracker::Join(const TaskId& task, bool* rejoined) {
  PSTRAIN_ASSIGN_OR_RETURN(const int replica, ReplicaOf(RoleName(task.role), task.index, "Join"));
  absl::MutexLock lock(&mu_);
  if (!generation_known_) return absl::UnavailableError("the chief is still starting");
  if (finished_) return true;
  const bool again = !joined_.insert(replica).second;
  if (rejoined != nullptr) *rejoined = again;
  auto it = reports_.find(replica);
  if (it == reports_.end()) return false;
  if (it->second.generation() == generation_) return true;
  Log(task.ToString(), " joins again; its report (generation ", it->second.generation(),
      ") was rolled back by a restore since (generation ", generation_, "): it trains again");
  if (!done_dir_.empty()) {
    std::error_code ec;
    const std::string path = absl::StrCat(done_dir_, "/", RoleName(task.role), "-", task.index);
    std::filesystem::remove(path, ec);
    if (ec) return FileError("removing the done report", path);
  }
  reports_.erase(it);
  return false;
}

size_t JobTracker::CountedReports(absl::Time now) const {
  size_t n = 0;
  for (const auto& [replica, report] : reports_) {
    n += report.generation() == generation_ || now >= stale_counts_from_;
  }
  return n;
}

absl::Status JobTracker::WaitForAll(absl::Duration timeout, int enough, absl::Duration grace) {
  const absl::Time deadline = absl::Now() + timeout;
  const size_t n = replicas_.size();
  const size_t need = enough > 0 && static_cast<size_t>(enough) < n ? enough : n;
  absl::Time enough_since = absl::InfiniteFuture();
  auto all_done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return CountedReports(absl::Now()) == n || !failed_.ok();
  };
  // Also wakes the first time `need` replicas have reported.
  auto wake_up = [this, n, need, &enough_since]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t counted = CountedReports(absl::Now());
    return counted == n || !failed_.ok() ||
           (counted >= need && enough_since == absl::InfiniteFuture());
  };
  auto missing = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> names;
    for (size_t r = 0; r < n; ++r) {
      if (reports_.count(r) == 0) names.push_back(Describe(r));
    }
    return absl::StrJoin(names, ", ");
  };
  absl::MutexLock lock(&mu_);
  absl::Time next_log = absl::Now() + absl::Seconds(30);
  while (true) {
    // Stale reports start counting at stale_counts_from_: a wake then.
    const absl::Time stale_from =
        stale_counts_from_ > absl::Now() ? stale_counts_from_ : absl::InfiniteFuture();
    const absl::Time wake = std::min({deadline, next_log, enough_since + grace, stale_from});
    mu_.AwaitWithDeadline(absl::Condition(&wake_up), wake);
    if (!failed_.ok()) return failed_;
    if (all_done()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (CountedReports(now) >= need && enough_since == absl::InfiniteFuture()) {
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
      return absl::DeadlineExceededError(absl::StrCat("after ", absl::FormatDuration(timeout),
                                                      " still waiting for ", missing(),
                                                      " to finish training"));
    }
    if (now >= next_log) {
      Log(reports_.size(), " of ", n, " replicas done; waiting for ", missing());
      next_log = now + absl::Seconds(30);
    }
  }
}

absl::Status JobTracker::failure() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

std::optional<absl::Status> JobTracker::FailedForGood() const {
  absl::MutexLock lock(&mu_);
  if (failed_.ok() || RoleExitCode(failed_, FailureKind::kPermanent) >= kExitRetryable) {
    return std::nullopt;
  }
  return failed_;
}

void JobTracker::NoteTold(const std::string& task) {
  absl::MutexLock lock(&mu_);
  told_.insert(task);
}

bool JobTracker::WaitUntilTold(const std::vector<std::string>& tasks, absl::Duration timeout) {
  auto all_told = [this, &tasks]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& t : tasks) {
      if (told_.count(t) == 0) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&all_told), timeout);
}

void JobTracker::Fail(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = std::move(why);
}

std::map<int, v1::ReportDoneRequest> JobTracker::reports() const {
  absl::MutexLock lock(&mu_);
  return reports_;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::ReportDone(grpc::CallbackServerContext* ctx,
                                                             const v1::ReportDoneRequest* req,
                                                             v1::ReportDoneResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "ReportDone");
  if (admitted.ok() && req->failed_exit_code() > 0) {
    // A replica that failed for good: the job fails with its code.
    const int code = req->failed_exit_code();
    absl::Status why = absl::FailedPreconditionError(
        absl::StrCat(req->task_type(), ":", req->task_index(), " failed for good (exit ", code,
                     "): ", req->failure()));
    Log(why.message());
    tracker_->NoteTold(absl::StrCat(req->task_type(), ":", req->task_index()));
    tracker_->Fail(WithFailureKind(std::move(why), code < kExitRetryable
                                                       ? FailureKindOfExitCode(code)
                                                       : FailureKind::kPermanent));
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  absl::Status s = admitted.ok() ? tracker_->MarkDone(*req) : admitted.status();
  if (s.ok()) {
    // Recorded, but the job failed for good meanwhile: the replica ends
    // with the job's code, as every task does.
    AnswerFailure(absl::StrCat(req->task_type(), ":", req->task_index()), resp);
    Log(req->task_type(), ":", req->task_index(), " finished: ", req->steps(), " steps, ",
        req->examples(), " examples, loss ", req->final_loss(), ", ",
        static_cast<int64_t>(req->examples_per_sec()), " examples/s");
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::Join(grpc::CallbackServerContext* ctx,
                                                       const v1::JoinRequest* req,
                                                       v1::JoinResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "Join");
  absl::Status s = admitted.status();
  if (s.ok() && AnswerFailure(absl::StrCat(req->task_type(), ":", req->task_index()), resp)) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  if (s.ok() && !req->job().empty() && !job_.is_null()) {
    // A task started with other job flags than the chief's: refused (it
    // exits 2), and the job fails at once rather than waiting for it.
    auto mine = ParseJson(req->job());
    std::vector<std::string> diff =
        mine.ok() ? DifferencesFromChief(job_, *mine)
                  : std::vector<std::string>{"its job description does not parse"};
    if (!diff.empty()) {
      s = absl::FailedPreconditionError(absl::StrCat(
          req->task_type(), ":", req->task_index(),
          " was started with other job flags than the chief: ", absl::StrJoin(diff, "; "),
          ". Give every task of the job the same job flags"));
      Log(s.message());
      // The configuration's: the job ends with exit 2 on every task.
      tracker_->Fail(WithFailureKind(s, FailureKind::kBadConfig));
    }
  }
  if (s.ok()) {
    auto task = ParseTaskName(absl::StrCat(req->task_type(), ":", req->task_index()));
    bool rejoined = false;
    auto done = task.ok() ? tracker_->Join(*task, &rejoined)
                          : absl::StatusOr<bool>(absl::InvalidArgumentError(
                                absl::StrCat("Join from ", req->task_type(), ":", req->task_index(),
                                             ": ", task.status().message())));
    s = done.status();
    if (done.ok()) {
      resp->set_done(*done);
      resp->set_rejoined(rejoined);
    }
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::JobOutcome(grpc::CallbackServerContext* ctx,
                                                             const v1::JobOutcomeRequest* req,
                                                             v1::JobOutcomeResponse* resp) {
  auto admitted = guard_.Admit(*ctx, "JobOutcome");
  if (admitted.ok()) AnswerFailure(req->task(), resp);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(admitted.status()));
  return reactor;
}

absl::Status ReportDoneToChief(const HostPort& address, const v1::ReportDoneRequest& report,
                               absl::Duration timeout, const Security& security,
                               const std::function<absl::Status()>& abort) {
  v1::ReportDoneResponse resp;
  absl::Status aborted;
  grpc::Status s = CallChief(
      address, security, timeout, absl::Seconds(2), /*fresh_channel=*/false,
      [&](v1::Coordinator::Stub& stub, grpc::ClientContext& ctx) {
        return stub.ReportDone(&ctx, report, &resp);
      },
      abort, &aborted);
  if (!aborted.ok()) return aborted;
  if (s.ok()) return FailureAnswered(resp).value_or(absl::OkStatus());
  return FromGrpcStatus(s, absl::StrCat("chief (", address.ToString(), ")"), "ReportDone");
}

std::vector<std::string> DifferencesFromChief(const Json& chief, const Json& mine) {
  const Json none = Json::object();
  auto part = [&none](const Json& j, absl::string_view key) -> const Json& {
    const Json* p = FindMember(j, key);
    return p != nullptr ? *p : none;
  };
  std::vector<std::string> out = JobDifferences(part(chief, "job"), part(mine, "job"));
  for (const std::string& d :
       ModelDifferences(part(chief, "model"), part(mine, "model"), "on the chief", "here")) {
    out.push_back(absl::StrCat("the model (--hidden, --model_config, --optimizer): ", d));
  }
  return out;
}

absl::StatusOr<bool> JoinChief(const HostPort& address, const TaskId& task, absl::Duration timeout,
                               const Security& security, const Json& job, bool* rejoined,
                               const std::function<absl::Status()>& abort) {
  v1::JoinRequest req;
  req.set_task_type(RoleName(task.role));
  req.set_task_index(task.index);
  if (!job.is_null()) req.set_job(job.dump());
  v1::JoinResponse resp;
  // Replicas start beside the chief and ask before they train; the chief
  // answers once it has taken over the PS, soon after it starts: fresh
  // channels, short waits.
  absl::Status aborted;
  grpc::Status s = CallChief(
      address, security, timeout, absl::Milliseconds(250),
      /*fresh_channel=*/true,
      [&](v1::Coordinator::Stub& stub, grpc::ClientContext& ctx) {
        return stub.Join(&ctx, req, &resp);
      },
      abort, &aborted);
  if (!aborted.ok()) return aborted;
  if (s.ok()) {
    if (std::optional<absl::Status> failed = FailureAnswered(resp)) return *failed;
    if (rejoined != nullptr) *rejoined = resp.rejoined();
    return resp.done();
  }
  absl::Status failed = FromGrpcStatus(s, absl::StrCat("chief (", address.ToString(), ")"), "Join");
  // The chief answered and refused this task (other job flags, a name it
  // does not know, another cluster token): the configuration's. Not
  // reaching it is retryable (base/exit_codes.h).
  switch (failed.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return WithFailureKind(std::move(failed), FailureKind::kBadConfig);
    default:
      return failed;
  }
}

}  // namespace pstrain::coordinator
