// The calls any task of a job makes on the task with chief duties about the
// job's end, whatever the task's role: a task that cannot take part tells
// the chief so (the job fails at once with its code instead of waiting for
// it), and a task waiting for something (its PS, the next checkpoint) asks
// whether the job has failed for good.
//
// A failure reaches the job's tasks two ways: the chief records it in
// run.json (job/run_record.h, EndedBadly) and answers it to whoever asks
// (Coordinator.JobOutcome and Join). The second is what tells them when the
// output directory cannot hold the record (read-only, full): the chief then
// answers for a while before it exits (coordinator/chief_duties.h).
#ifndef PSTRAIN_JOB_CHIEF_CLIENT_H_
#define PSTRAIN_JOB_CHIEF_CLIENT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "cluster/tf_config.h"
#include "grpcpp/grpcpp.h"
#include "proto/coordinator.grpc.pb.h"
#include "transport/security.h"

namespace pstrain {

// Makes `call` on the chief at `address` until it ends other than
// UNAVAILABLE (the chief may still be starting) or `timeout` would pass,
// waiting 100 ms, then twice as long each time up to `max_backoff`. With
// `fresh_channel`, each try gets a channel (and a connection) of its own,
// reached at once rather than after gRPC's reconnect backoff. `abort`
// (optional), asked before each retry: a non-OK answer ends the calls, and
// is stored in `*aborted`.
grpc::Status CallChief(
    const HostPort& address, const Security& security, absl::Duration timeout,
    absl::Duration max_backoff, bool fresh_channel,
    const std::function<grpc::Status(v1::Coordinator::Stub&, grpc::ClientContext&)>& call,
    const std::function<absl::Status()>& abort, absl::Status* aborted);

// Tells the task with chief duties that `task` failed for good with `why`
// and ends with `exit_code` (1 or 2): the job fails at once with that code.
// `task` need not be one of the job's (a task started with an index its
// cluster does not have tells it too). Best effort, within `timeout`: a
// chief not reached is logged.
void ReportFailureToChief(const HostPort& address, const TaskId& task, const absl::Status& why,
                          int exit_code, const Security& security,
                          absl::Duration timeout = absl::Seconds(5));

// The job's failure for good as the chief answered it (a JobOutcome or
// Join response's failed_exit_code and failure): "the job failed for good
// (exit 2): <why>", marked with the kind its code stands for.
absl::Status FailureFromChief(int exit_code, const std::string& failure);

// The failure for good a Join, ReportDone or JobOutcome response carries
// (FailureFromChief), or nullopt when it carries none (failed_exit_code
// outside 1-127).
template <typename Response>
std::optional<absl::Status> FailureAnswered(const Response& resp) {
  if (resp.failed_exit_code() <= 0 || resp.failed_exit_code() >= 128) return std::nullopt;
  return FailureFromChief(resp.failed_exit_code(), resp.failure());
}

// Asks the chief at `address` (one call, within `deadline`) whether the job
// failed for good: that failure (FailureFromChief), or nullopt when the
// chief says it did not, or could not be asked. `asking` names the task
// ("evaluator:0").
std::optional<absl::Status> AskChiefForFailure(v1::Coordinator::Stub& chief,
                                               const std::string& asking, absl::Duration deadline);

// What a task waiting for its job asks (a worker waiting for the chief or
// its PS, an evaluator between polls): the job's failure for good, from
// run.json in `dir` (EndedBadly(dir, flags, cluster, since)), else from the
// chief at `chief` (when set), asked at most once every `min_interval`
// (a failure it answered is kept: later calls return it at once); OK while
// neither says the job failed. Thread-safe.
std::function<absl::Status()> JobFailureCheck(std::string dir, std::vector<std::string> flags,
                                              Json cluster, absl::Time since,
                                              std::optional<HostPort> chief, std::string asking,
                                              std::shared_ptr<const Security> security,
                                              absl::Duration min_interval = absl::Seconds(1));

}  // namespace pstrain

#endif  // PSTRAIN_JOB_CHIEF_CLIENT_H_
