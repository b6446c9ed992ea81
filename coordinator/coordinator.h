// The chief's coordination state and its gRPC face.
//
// JobTracker records which training replicas have finished; the Coordinator
// service (CoordinatorServiceImpl) lets them report it; ReportDoneToChief is
// how a worker does. Thread-safe.
#ifndef PSTRAIN_COORDINATOR_COORDINATOR_H_
#define PSTRAIN_COORDINATOR_COORDINATOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/call_guard.h"
#include "common/security.h"
#include "common/tf_config.h"
#include "proto/coordinator.grpc.pb.h"

namespace pstrain::coordinator {

class JobTracker {
 public:
  // The job's training replicas are TrainingReplicas(cluster, chief_trains).
  JobTracker(const ClusterSpec& cluster, bool chief_trains);

  // Records that the task `report.task_type():report.task_index()` finished.
  // InvalidArgument for a task that is not one of the training replicas; a
  // repeated report replaces the earlier one (a retried RPC).
  absl::Status MarkDone(const v1::ReportDoneRequest& report)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until every replica has reported or `timeout` passes, logging
  // every 30 s who is still training. DeadlineExceeded naming each missing
  // replica by task and address. With 0 < `enough` < replicas (sync backup
  // replicas: the job's steps are done once `enough` have finished), waits
  // at most `grace` for the rest after `enough` have reported, then returns
  // OK, logging those missing as lost.
  absl::Status WaitForAll(absl::Duration timeout, int enough = 0,
                          absl::Duration grace = absl::ZeroDuration()) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the job early: WaitForAll returns `why` (not OK) from now on.
  void Fail(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);

  // The reports so far, by replica number.
  std::map<int, v1::ReportDoneRequest> reports() const ABSL_LOCKS_EXCLUDED(mu_);

  // The training replicas, in replica order.
  const std::vector<TaskId>& replicas() const { return replicas_; }

 private:
  // "worker:1 (host:port)".
  std::string Describe(int replica) const;

  const ClusterSpec cluster_;
  const std::vector<TaskId> replicas_;
  mutable absl::Mutex mu_;
  std::map<int, v1::ReportDoneRequest> reports_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

class CoordinatorServiceImpl final : public v1::Coordinator::CallbackService {
 public:
  // `tracker` must outlive the service.
  // Calls are admitted as common/call_guard.h says (token, calls in flight).
  CoordinatorServiceImpl(JobTracker* tracker, std::shared_ptr<const Security> security)
      : tracker_(tracker), guard_(std::move(security), CallLimits()) {}

  grpc::ServerUnaryReactor* ReportDone(grpc::CallbackServerContext* ctx,
                                       const v1::ReportDoneRequest* req,
                                       v1::ReportDoneResponse* resp) override;

 private:
  JobTracker* const tracker_;
  CallGuard guard_;
};

// Sends ReportDone to the task with chief duties at `address`, retrying
// Unavailable (the chief may still be starting) with backoff for up to
// `timeout`. Errors name the chief: "chief (host:port): ReportDone: ...".
absl::Status ReportDoneToChief(const HostPort& address,
                               const v1::ReportDoneRequest& report,
                               absl::Duration timeout,
                               const Security& security);

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_COORDINATOR_H_
