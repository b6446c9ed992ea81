// The chief's and the workers' main in a cluster without PS (TF_CONFIG has
// no "ps"): MultiWorkerMirroredStrategy's setting. The training tasks (the
// chief, if named, then the workers, in TF_CONFIG's order) join a ring
// (transport/ring.h), each on its own TF_CONFIG address, and train
// synchronously: every replica holds the whole model, computes the gradient
// of its share of the global batch, and applies the average the ring
// computed (client/collective_store.h), so every replica stays the same.
// Replica 0 (the chief, or worker 0 when none is named) writes the run's
// files as `train --local` writes them (run.json, checkpoints, summaries,
// final_metrics.json), which the evaluator, inspect, evaluate, predict,
// export and a resume read as they read any run's. With the job's TLS
// (--tls_cert, --tls_key, --tls_ca) every link of the ring is a TLS 1.3
// connection with the PS path's peer checks; the cluster token, when there
// is one, is checked on each as well.
//
// Exit codes: a configuration the mode cannot run (async or ssp, backup
// workers) is the configuration's (2); so is a replica's failure to start
// (its data, the run on disk), which every replica ends with, as the
// replicas share each launch step's outcome (train/group_outcome.h); a
// neighbour that never came, went away or stalled is retryable (the
// transport's codes), so that a restart policy or `pstrain launch` starts
// the job again and it resumes from the last checkpoint.
#ifndef PSTRAIN_ALLREDUCE_ALLREDUCE_MAIN_H_
#define PSTRAIN_ALLREDUCE_ALLREDUCE_MAIN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/cli_args.h"
#include "cluster/tf_config.h"
#include "model/job_spec.h"
#include "train/local_trainer.h"
#include "transport/ring.h"
#include "transport/security.h"

namespace pstrain::allreduce {

// The ring's members, in replica order: the chief (if any), then the workers.
std::vector<RingMember> RingMembers(const ClusterSpec& cluster);
// This task's replica: its place in RingMembers. REQUIRES: a chief or worker.
int ReplicaOf(const TaskId& task, const ClusterSpec& cluster);

// Whether `job` can run without PS: every step is synchronous here, so
// --consistency=async or ssp (given as a flag: `consistency_given`) and
// backup workers (replicas_to_aggregate below the replicas) are refused,
// naming what to use instead.
absl::Status CheckJobForAllReduce(const model::JobSpec& job, bool consistency_given,
                                  int num_replicas);

// Makes `group` train over `ring` (which must outlive the training): each
// replica's store wrapped in a collective store, its all-gather, its
// announcement of a failure for good and what it was told the ring's;
// dense gradients cross the ring as bfloat16 with job.bfloat16_wire, in
// packs of job.bytes_per_pack. Every member must call it (for `auto`, the
// members settle the packs together, by whether any link of the ring is
// TCP): an error is the ring's.
absl::Status TrainOverRing(Ring* ring, train::ReplicaGroup* group, const model::JobSpec& job);

int AllReduceMain(const TfConfig& cfg, CliArgs& args, std::shared_ptr<const Security> security);

}  // namespace pstrain::allreduce

#endif  // PSTRAIN_ALLREDUCE_ALLREDUCE_MAIN_H_
