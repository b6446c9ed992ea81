// The chief's coordination state and its gRPC face.
//
// JobTracker records which training replicas have finished, and, given a
// directory, keeps each report there (<dir>/done/<type>-<index>, written
// and fsynced before the report is acknowledged) so that a restarted chief
// does not wait for a replica that finished and exited; the Coordinator
// service (CoordinatorServiceImpl) lets them report it; ReportDoneToChief is
// how a worker does. Thread-safe.
#ifndef PSTRAIN_COORDINATOR_COORDINATOR_H_
#define PSTRAIN_COORDINATOR_COORDINATOR_H_

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/exit_codes.h"
#include "transport/call_guard.h"
#include "base/json.h"
#include "transport/security.h"
#include "cluster/tf_config.h"
#include "job/chief_client.h"
#include "job/job_description.h"
#include "proto/coordinator.grpc.pb.h"

namespace pstrain::coordinator {

class JobTracker {
 public:
  // The job's training replicas are TrainingReplicas(cluster, chief_trains).
  JobTracker(const ClusterSpec& cluster, bool chief_trains);

  // Keeps reports under `dir`/done from now on, and reads back those kept
  // there before (by an earlier run of the chief); returns how many it read.
  // A file that does not parse, or names a task that is not a training
  // replica of this cluster, is an error naming it (DataLoss), as is one
  // that cannot be read. Until SetGeneration is called, reports and joins
  // are answered Unavailable (the chief is still starting). A report read
  // back that is stale (of another generation than the one set) counts for
  // WaitForAll only `rejoin_grace` after this call: time for its replica,
  // when it was started again (a whole job relaunched), to Join and train.
  absl::StatusOr<int> KeepReportsIn(const std::string& dir, absl::Duration rejoin_grace)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The recovery generation the PS serve from now on (0 until set). Reports
  // are stamped with it.
  void SetGeneration(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t generation() const ABSL_LOCKS_EXCLUDED(mu_);
  // The whole job has finished: every Join is answered done.
  void SetFinished() ABSL_LOCKS_EXCLUDED(mu_);

  // Records that the task `report.task_type():report.task_index()` finished
  // (and, with KeepReportsIn, writes it to disk first: an error then means
  // the report was not recorded), stamped with the generation. InvalidArgument
  // for a task that is not one of the training replicas; a repeated report
  // replaces the earlier one (a retried RPC).
  absl::Status MarkDone(const v1::ReportDoneRequest& report) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `task` is to train (false) or is done (true): done when it has
  // a report of the current generation, or the job finished. A stale
  // report (a restore rolled its steps back since) is dropped, from disk
  // too, and the replica trains again. InvalidArgument for a task that is
  // not a training replica. `rejoined` (optional): set when the task joined
  // this chief before and is to train again (the task was restarted while
  // the job went on).
  absl::StatusOr<bool> Join(const TaskId& task, bool* rejoined = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // The failure given to Fail, or OK.
  absl::Status failure() const ABSL_LOCKS_EXCLUDED(mu_);

  // The failure given to Fail when it is for good (its exit code 1-127:
  // every task ends with it), else nullopt. What Join and JobOutcome
  // answer to every task that asks.
  std::optional<absl::Status> FailedForGood() const ABSL_LOCKS_EXCLUDED(mu_);
  // `task` ("worker:1") has been answered the failure for good.
  void NoteTold(const std::string& task) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every one of `tasks` has been told (NoteTold) or `timeout`
  // passes; whether they all were.
  bool WaitUntilTold(const std::vector<std::string>& tasks, absl::Duration timeout)
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
  // The replica number of a task, or InvalidArgument (`what` names the call).
  absl::StatusOr<int> ReplicaOf(const std::string& type, int index, absl::string_view what) const;
  // Reports WaitForAll counts: those of the current generation, and stale
  // ones once the rejoin grace has passed.
  size_t CountedReports(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterSpec cluster_;
  const std::vector<TaskId> replicas_;
  mutable absl::Mutex mu_;
  std::map<int, v1::ReportDoneRequest> reports_ ABSL_GUARDED_BY(mu_);
  std::string done_dir_ ABSL_GUARDED_BY(mu_);  // empty: reports in memory only
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int> joined_ ABSL_GUARDED_BY(mu_);          // replicas that joined this chief
  bool generation_known_ ABSL_GUARDED_BY(mu_) = true;  // false from KeepReportsIn to SetGeneration
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> told_ ABSL_GUARDED_BY(mu_);  // tasks answered a failure for good
  absl::Time stale_counts_from_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

class CoordinatorServiceImpl final : public v1::Coordinator::CallbackService {
 public:
  // `tracker` must outlive the service.
  // Calls are admitted as transport/call_guard.h says (token, calls in flight).
  CoordinatorServiceImpl(JobTracker* tracker, std::shared_ptr<const Security> security)
      : tracker_(tracker), guard_(std::move(security), CallLimits()) {}

  // The chief's own job ({"job", "model"}, job/job_description.h), which
  // each Join's is compared with. Call before the service is served.
  void SetJob(Json job) { job_ = std::move(job); }

  grpc::ServerUnaryReactor* ReportDone(grpc::CallbackServerContext* ctx,
                                       const v1::ReportDoneRequest* req,
                                       v1::ReportDoneResponse* resp) override;
  // A job that failed for good (JobTracker::FailedForGood) answers every
  // Join with its code and reason (the task does not train) and so does
  // JobOutcome; either way the task counts as told (JobTracker::NoteTold).
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* JobOutcome(grpc::CallbackServerContext* ctx,
                                       const v1::JobOutcomeRequest* req,
                                       v1::JobOutcomeResponse* resp) override;

 private:
  // Fills the failure for good into `resp` (a Join, ReportDone or
  // JobOutcome response: failed_exit_code, failure) and notes `task` as
  // told; false when the job has not failed for good.
  template <typename Response>
  bool AnswerFailure(const std::string& task, Response* resp) {
    std::optional<absl::Status> failed = tracker_->FailedForGood();
    if (!failed.has_value()) return false;
    resp->set_failed_exit_code(RoleExitCode(*failed, FailureKind::kPermanent));
    resp->set_failure(std::string(failed->message()));
    tracker_->NoteTold(task);
    return true;
  }

  JobTracker* const tracker_;
  CallGuard guard_;
  Json job_;  // set before serving; read only after
};

// The ways in which a task's job (`mine`, as JoinRequest.job) differs from
// the chief's (`chief`): each differing flag (JobDifferences), then the
// model's differences (ModelDifferences) prefixed "the model (--hidden,
// --model_config, --optimizer): ". Empty when they match.
std::vector<std::string> DifferencesFromChief(const Json& chief, const Json& mine);

// Sends ReportDone to the task with chief duties at `address`, retrying
// Unavailable (the chief may still be starting) with backoff for up to
// `timeout`. Errors name the chief: "chief (host:port): ReportDone: ...".
// `abort` (optional), asked before each retry: a non-OK answer (the job
// failed for good, as its record on disk says) ends the wait with it. A
// chief whose job failed for good records the report and answers that
// failure (job/chief_client.h, FailureFromChief).
absl::Status ReportDoneToChief(const HostPort& address, const v1::ReportDoneRequest& report,
                               absl::Duration timeout, const Security& security,
                               const std::function<absl::Status()>& abort = nullptr);

// Asks the task with chief duties whether `task` is to train (false) or
// has finished already (true); retries as ReportDoneToChief does.
// `job`: the task's own ({"job", "model"}); a chief whose job differs
// answers FailedPrecondition naming each difference. `abort` as for
// ReportDoneToChief. A chief whose job failed for good answers that
// failure (job/chief_client.h, FailureFromChief), marked with its kind.
absl::StatusOr<bool> JoinChief(const HostPort& address, const TaskId& task, absl::Duration timeout,
                               const Security& security, const Json& job = Json(),
                               bool* rejoined = nullptr,
                               const std::function<absl::Status()>& abort = nullptr);

}  // namespace pstrain::coordinator

#endif  // PSTRAIN_COORDINATOR_COORDINATOR_H_
