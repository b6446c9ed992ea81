// One training replica's part of a job, shared by the worker role and the
// chief when it trains: connect to the PS, wait until they hold initialised
// variables, train this task's shard (train/trainer.h) and return what it
// reports to the chief. Main-layer code.
#ifndef PSTRAIN_TRAIN_REPLICA_H_
#define PSTRAIN_TRAIN_REPLICA_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/security.h"
#include "cluster/tf_config.h"
#include "model/job_spec.h"
#include "proto/coordinator.pb.h"

namespace pstrain::train {

struct ReplicaOptions {
  model::JobSpec job;
  std::string output_dir;
  // How long to wait for the PS to answer and hold initialised variables,
  // at the start and after a PS was lost (TrainerOptions::recovery_wait).
  absl::Duration ps_wait = absl::Minutes(2);
  std::shared_ptr<const Security> security;  // for the PS channels
  // When set (the task with chief duties): the job's failure, which ends
  // this replica's waits for the PS (PsClient::SetAbortCheck).
  std::function<absl::Status()> job_failure;
};

// Trains `cfg.task` as replica ReplicaIndexOf(cfg.cluster, cfg.task,
// job.chief_trains) of TrainingReplicas(...). Replica 0 writes the training
// summaries under output_dir/train. Returns the ReportDone request for the
// chief (task type and index, steps, examples, final loss, examples/s).
// FailedPrecondition when the task is not a training replica; errors of the
// data, the PS client (naming the PS) and the model.
absl::StatusOr<v1::ReportDoneRequest> TrainAsReplica(const TfConfig& cfg,
                                                     const ReplicaOptions& options);

}  // namespace pstrain::train

#endif  // PSTRAIN_TRAIN_REPLICA_H_
