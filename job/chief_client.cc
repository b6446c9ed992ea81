#include "job/chief_client.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "job/run_record.h"

namespace pstrain {

grpc::Status CallChief(
    const HostPort& address, const Security& security, absl::Duration timeout,
    absl::Duration max_backoff, bool fresh_channel,
    const std::function<grpc::Status(v1::Coordinator::Stub&, grpc::ClientContext&)>& call,
    const std::function<absl::Status()>& abort, absl::Status* aborted) {
  grpc::ChannelArguments args;
  if (fresh_channel) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::unique_ptr<v1::Coordinator::Stub> stub;
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    if (stub == nullptr || fresh_channel) {
      stub = v1::Coordinator::NewStub(security.CreateChannel(address.ToString(), args));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = call(*stub, ctx);
    if (s.ok() || s.error_code() != grpc::StatusCode::UNAVAILABLE ||
        absl::Now() + backoff > deadline) {
      return s;
    }
    if (abort) {
      if (absl::Status why = abort(); !why.ok()) {
        *aborted = std::move(why);
        return s;
      }
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, max_backoff);
  }
}

void ReportFailureToChief(const HostPort& address, const TaskId& task, const absl::Status& why,
                          int exit_code, const Security& security, absl::Duration timeout) {
  v1::ReportDoneRequest report;
  report.set_task_type(RoleName(task.role));
  report.set_task_index(task.index);
  report.set_failed_exit_code(exit_code);
  report.set_failure(std::string(why.message()));
  v1::ReportDoneResponse resp;
  absl::Status aborted;
  // Fresh channels: the chief may still be starting, and is reached the
  // moment it serves rather than after gRPC's reconnect backoff.
  grpc::Status s = CallChief(
      address, security, timeout, absl::Seconds(1), /*fresh_channel=*/true,
      [&](v1::Coordinator::Stub& stub, grpc::ClientContext& ctx) {
        return stub.ReportDone(&ctx, report, &resp);
      },
      nullptr, &aborted);
  if (!s.ok()) {
    Log("could not tell the chief (", address.ToString(), ") that ", task.ToString(),
        " failed: ", s.error_message());
  }
}

absl::Status FailureFromChief(int exit_code, const std::string& failure) {
  return WithFailureKind(absl::FailedPreconditionError(absl::StrCat(
                             "the job failed for good (exit ", exit_code, "): ", failure)),
                         FailureKindOfExitCode(exit_code));
}

std::optional<absl::Status> AskChiefForFailure(v1::Coordinator::Stub& chief,
                                               const std::string& asking, absl::Duration deadline) {
  v1::JobOutcomeRequest req;
  req.set_task(asking);
  v1::JobOutcomeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(deadline));
  grpc::Status s = chief.JobOutcome(&ctx, req, &resp);
  if (!s.ok()) return std::nullopt;
  return FailureAnswered(resp);
}

std::function<absl::Status()> JobFailureCheck(std::string dir, std::vector<std::string> flags,
                                              Json cluster, absl::Time since,
                                              std::optional<HostPort> chief, std::string asking,
                                              std::shared_ptr<const Security> security,
                                              absl::Duration min_interval) {
  struct State {
    absl::Mutex mu;
    std::unique_ptr<v1::Coordinator::Stub> stub ABSL_GUARDED_BY(mu);
    absl::Time last_asked ABSL_GUARDED_BY(mu) = absl::InfinitePast();
    // What the chief said once the job failed for good: final.
    absl::Status told ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>();
  return [=]() -> absl::Status {
    if (std::optional<absl::Status> recorded = EndedBadly(dir, flags, cluster, since)) {
      return *recorded;
    }
    if (!chief.has_value() || security == nullptr) return absl::OkStatus();
    absl::MutexLock lock(&state->mu);
    if (!state->told.ok()) return state->told;
    const absl::Time now = absl::Now();
    if (now - state->last_asked < min_interval) return absl::OkStatus();
    state->last_asked = now;
    if (state->stub == nullptr) {
      state->stub = v1::Coordinator::NewStub(
          security->CreateChannel(chief->ToString(), grpc::ChannelArguments()));
    }
    state->told = AskChiefForFailure(*state->stub, asking, absl::Milliseconds(500))
                      .value_or(absl::OkStatus());
    return state->told;
  };
}

}  // namespace pstrain
