#include "train/replica.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ps_client.h"
#include "client/remote_store.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "data/dataset.h"
#include "data/input.h"
#include "model/model_graph.h"
#include "train/trainer.h"

namespace pstrain::train {

namespace {

// What a replica needs before its first step: the model's layout, a
// client of the PS, its share of the training data.
struct ReplicaSetup {
  std::optional<model::ModelGraph> graph;
  std::unique_ptr<client::PsClient> client;
  data::TrainingInput data;
  int replica = 0;
  int num_replicas = 0;
};

absl::StatusOr<ReplicaSetup> SetUp(const TfConfig& cfg, const ReplicaOptions& options) {
  const model::JobSpec& job = options.job;
  ReplicaSetup setup;
  setup.replica = ReplicaIndexOf(cfg.cluster, cfg.task, job.chief_trains);
  const int replica = setup.replica;
  if (replica < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(cfg.task.ToString(), " is not a training replica of this job"));
  }
  setup.num_replicas = static_cast<int>(TrainingReplicas(cfg.cluster, job.chief_trains).size());
  PSTRAIN_ASSIGN_OR_RETURN(setup.graph, model::ModelGraph::Create(job.model));
  PSTRAIN_ASSIGN_OR_RETURN(Placement placement,
                           ComputePlacement(setup.graph->variables(), cfg.cluster.ps.size()));
  client::PsClientOptions client_options;
  client_options.ps_addresses = cfg.cluster.ps;
  client_options.replica = replica;
  client_options.consistency = job.consistency;
  client_options.security = options.security;
  client_options.shared_memory = job.shared_memory;
  client_options.tcp_frames = job.tcp_frames;
  client_options.bfloat16_wire = job.bfloat16_wire;
  // Pulls wait on the PS for other replicas up to sync_wait; the PS then
  // answers, naming them.
  client_options.wait_deadline = absl::Seconds(job.sync_wait_secs) + absl::Seconds(30);
  PSTRAIN_ASSIGN_OR_RETURN(setup.client, client::PsClient::Create(client_options, placement));
  PSTRAIN_ASSIGN_OR_RETURN(
      setup.data, data::OpenTrainingInput(job.data_dir, job.input, replica, setup.num_replicas,
                                          job.batch_size, job.seed, job.model.num_classes()));
  return setup;
}

}  // namespace

absl::StatusOr<v1::ReportDoneRequest> TrainAsReplica(const TfConfig& cfg,
                                                     const ReplicaOptions& options) {
  const model::JobSpec& job = options.job;
  // Its failures are the configuration's (the data, the model), unless
  // transient (base/exit_codes.h).
  absl::StatusOr<ReplicaSetup> set_up = SetUp(cfg, options);
  if (!set_up.ok()) return AsSetupFailure(set_up.status());
  const int replica = set_up->replica;
  const int num_replicas = set_up->num_replicas;
  const model::ModelGraph& graph = *set_up->graph;
  std::unique_ptr<client::PsClient>& client = set_up->client;
  data::TrainingInput& data = set_up->data;
  if (data.skipped_records > 0) {
    Log("skipped ", data.skipped_records, " bad training records (skip_bad_records)");
  }
  if (data.by_file) {
    Log(absl::StrFormat("reading %d of the %d training files (sharded by file): %d of %d examples",
                        data.files_read, data.files_total, data.source->shard_size(),
                        data.split_examples));
  }
  if (data.streamed) {
    Log("streaming the training files through a shuffle buffer of ", job.input.shuffle_buffer,
        " examples");
  }
  Log("training as replica ", replica, " of ", num_replicas,
      "; waiting for the ps to hold initialised variables");
  if (options.job_failure) client->SetAbortCheck(options.job_failure);
  PSTRAIN_RETURN_IF_ERROR(client->WaitUntilReady(options.ps_wait, true));

  TrainerOptions trainer;
  trainer.job = job;
  trainer.replica = replica;
  trainer.num_replicas = num_replicas;
  trainer.recovery_wait = options.ps_wait;
  trainer.split_examples = data.split_examples;
  ApplyStraggler(cfg.task.ToString(), &trainer);
  for (const TaskId& id : TrainingReplicas(cfg.cluster, job.chief_trains)) {
    trainer.replica_names.push_back(id.ToString());
  }
  // Replica 0 reports the training scalars for the job.
  if (replica == 0) trainer.summary_dir = options.output_dir + "/train";
  client::RemoteStore store(client.get(), graph.offsets());
  PSTRAIN_ASSIGN_OR_RETURN(TrainerResult trained, RunTrainer(trainer, data.source.get(), &store));
  Log(absl::StrFormat("done: %d steps in %.1fs, %.0f examples/s", trained.steps, trained.seconds,
                      trained.examples_per_sec));
  v1::ReportDoneRequest report;
  report.set_task_type(RoleName(cfg.task.role));
  report.set_task_index(cfg.task.index);
  report.set_steps(trained.steps);
  report.set_examples(trained.examples);
  report.set_final_loss(trained.final_loss);
  report.set_examples_per_sec(trained.examples_per_sec);
  report.set_schedule_steps(trained.schedule_steps);
  const double end = absl::ToUnixMicros(absl::Now()) / 1e6;
  report.set_train_start_unix(end - trained.seconds);
  report.set_train_end_unix(end);
  return report;
}

}  // namespace pstrain::train
